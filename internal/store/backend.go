package store

import (
	"context"
	"sync"

	"github.com/txoutbox/outbox/driver"
)

// Backend is what the outbox builds from a driver: the store over the
// driver's pool and the database-specific extras.
type Backend struct {
	Store *Store
	// Session opens a dedicated connection (migrations).
	Session func(ctx context.Context) (Session, error)
	// Listen blocks, calling wake whenever another process signalled new
	// messages, until ctx is done or the connection fails. Nil when the
	// database has no such mechanism.
	Listen func(ctx context.Context, wake func()) error
	// Notify signals listeners in other processes. Nil when unsupported.
	Notify func(ctx context.Context) error
	// Local wakes relays in this process over the same pool.
	Local Waker
}

// NewBackend builds the backend of d: its store over d's pool, its session,
// LISTEN/NOTIFY when d supports them, and in-process wake-ups shared by
// every backend of the same driver identity.
func NewBackend[TTx any](d driver.Driver[TTx]) *Backend {
	b := &Backend{
		Store:   New(Dialect(d.Dialect()), d.Executor()),
		Session: d.Session,
		Local:   Waker{key: d.Identity()},
	}
	b.Store.session = d.Session
	if b.Local.key == nil {
		b.Local.key = d
	}
	if l, ok := d.(driver.Listener); ok && l.SupportsListen() {
		b.ListenOn(l)
		b.Notify = func(ctx context.Context) error { return l.Notify(ctx, NotifyChannel) }
	}
	return b
}

// ListenOn makes b listen for signals over l instead of its own driver.
func (b *Backend) ListenOn(l driver.Listener) {
	b.Listen = func(ctx context.Context, wake func()) error { return l.Listen(ctx, NotifyChannel, wake) }
}

// NotifyChannel is the PostgreSQL LISTEN/NOTIFY channel relays listen on.
const NotifyChannel = "outbox_messages"

// Waker fans a wake-up out to the subscribers of every Waker with the same
// key (a driver identity), without blocking. The zero Waker reaches only
// its own subscribers.
type Waker struct{ key any }

// wakers holds the subscribers per key; a key leaves it with its last
// subscriber, so pools that are gone are not kept alive.
var wakers = struct {
	mu   sync.Mutex
	subs map[any]map[chan struct{}]struct{}
}{subs: map[any]map[chan struct{}]struct{}{}}

func (w *Waker) id() any {
	if w.key == nil {
		return w
	}
	return w.key
}

// Subscribe returns a channel that receives (coalesced) wake-ups and a
// function that stops them.
func (w *Waker) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	key := w.id()
	wakers.mu.Lock()
	if wakers.subs[key] == nil {
		wakers.subs[key] = map[chan struct{}]struct{}{}
	}
	wakers.subs[key][ch] = struct{}{}
	wakers.mu.Unlock()
	return ch, func() {
		wakers.mu.Lock()
		if cur := wakers.subs[key]; cur != nil {
			delete(cur, ch)
			if len(cur) == 0 {
				delete(wakers.subs, key)
			}
		}
		wakers.mu.Unlock()
	}
}

// Wake signals every subscriber.
func (w *Waker) Wake() {
	key := w.id()
	wakers.mu.Lock()
	for ch := range wakers.subs[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	wakers.mu.Unlock()
}
