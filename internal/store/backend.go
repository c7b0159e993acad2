package store

import (
	"context"
	"sync"
)

// Backend is what a driver package hands the outbox: the store over the
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
	// Local wakes relays in this process.
	Local Waker
}

// NotifyChannel is the PostgreSQL LISTEN/NOTIFY channel relays listen on.
const NotifyChannel = "outbox_messages"

// Waker fans a wake-up out to subscribers without blocking.
type Waker struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives (coalesced) wake-ups and a
// function that stops them.
func (w *Waker) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[chan struct{}]struct{}{}
	}
	w.subs[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.subs, ch)
		w.mu.Unlock()
	}
}

// Wake signals every subscriber.
func (w *Waker) Wake() {
	w.mu.Lock()
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
}
