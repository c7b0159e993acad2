package store

import (
	"context"
	"sync"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/internal/adopt"
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
	// Feed follows the database's commits for relays that would
	// otherwise probe (driver.ChangeFeed). Nil when there is none.
	Feed driver.ChangeFeed
	// table is the profile of the driver's adopted table (TableSource),
	// nil when it has none.
	table *adopt.Profile
}

// TableSource is a capability of a driver value over a database whose
// local message table the application already writes (the command's
// --adopt, docs/adopt.md): a relay, a fleet or an admin server built over
// such a driver reads and changes that table, as the profile AdoptedTable
// returns maps it, instead of outbox_messages, through the store package
// adoptstore builds over the backend (adoptstore.Of).
type TableSource interface {
	AdoptedTable() *adopt.Profile
}

// Adopting returns d, or, when p is not nil, d as a TableSource over the
// table p maps. It keeps d's signalling (driver.Listener).
func Adopting[TTx any](d driver.Driver[TTx], p *adopt.Profile) driver.Driver[TTx] {
	if p == nil {
		return d
	}
	return adopting[TTx]{d, p}
}

type adopting[TTx any] struct {
	driver.Driver[TTx]
	p *adopt.Profile
}

func (d adopting[TTx]) AdoptedTable() *adopt.Profile { return d.p }

func (d adopting[TTx]) SupportsListen() bool {
	l, ok := d.Driver.(driver.Listener)
	return ok && l.SupportsListen()
}

func (d adopting[TTx]) Listen(ctx context.Context, channel string, wake func()) error {
	return d.Driver.(driver.Listener).Listen(ctx, channel, wake)
}

func (d adopting[TTx]) Notify(ctx context.Context, channel string) error {
	return d.Driver.(driver.Listener).Notify(ctx, channel)
}

// AdoptedTable is the profile of the adopted table b's driver reads when
// it is a TableSource, nil when it is not.
func (b *Backend) AdoptedTable() *adopt.Profile { return b.table }

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
	if src, ok := d.(TableSource); ok {
		b.table = src.AdoptedTable()
	}
	b.Feed = changeFeedOf(d)
	if l, ok := d.(driver.Listener); ok && l.SupportsListen() {
		b.ListenOn(l)
		b.Notify = func(ctx context.Context) error { return l.Notify(ctx, NotifyChannel) }
	}
	return b
}

// changeFeedOf is d's change feed: the one Following gave it, or d as a
// driver.ChangeFeed (the driver an adopting driver wraps); nil when it has
// none.
func changeFeedOf[TTx any](d driver.Driver[TTx]) driver.ChangeFeed {
	if a, ok := d.(adopting[TTx]); ok {
		d = a.Driver
	}
	if fd, ok := d.(following[TTx]); ok {
		return fd.feed
	}
	f, _ := d.(driver.ChangeFeed)
	return f
}

// Following returns d, or, when f is not nil, d with f as its change feed
// (driver.ChangeFeed): the relays and fleets built over it follow f. It
// keeps d's signalling (driver.Listener).
func Following[TTx any](d driver.Driver[TTx], f driver.ChangeFeed) driver.Driver[TTx] {
	if f == nil {
		return d
	}
	return following[TTx]{d, f}
}

type following[TTx any] struct {
	driver.Driver[TTx]
	feed driver.ChangeFeed
}

func (d following[TTx]) SupportsListen() bool {
	l, ok := d.Driver.(driver.Listener)
	return ok && l.SupportsListen()
}

func (d following[TTx]) Listen(ctx context.Context, channel string, wake func()) error {
	return d.Driver.(driver.Listener).Listen(ctx, channel, wake)
}

func (d following[TTx]) Notify(ctx context.Context, channel string) error {
	return d.Driver.(driver.Listener).Notify(ctx, channel)
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
