package enqueue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// Config is a producer's configuration (outbox.Config, which documents
// the fields) as Rows and Notifier use it.
type Config struct {
	MaxPayloadBytes int
	NotifyInterval  time.Duration
	TTL             time.Duration
	Seal            *Seal
	ClaimCheck      *ClaimCheck
}

// Validate reports the first field of c that is out of range.
func (c Config) Validate() error {
	if c.MaxPayloadBytes < 0 {
		return errors.New("outbox: Config.MaxPayloadBytes must not be negative")
	}
	if c.NotifyInterval < 0 {
		return errors.New("outbox: Config.NotifyInterval must not be negative")
	}
	if c.TTL < 0 {
		return errors.New("outbox: Config.TTL must not be negative")
	}
	if c.Seal != nil {
		if err := c.Seal.Validate(); err != nil {
			return err
		}
	}
	if c.ClaimCheck != nil {
		return c.ClaimCheck.Validate()
	}
	return nil
}

// Rows validates the n messages of a call (message i is msg(i)) and
// renders them as rows, in order, with their message ids and the blobs
// the claim check takes out of them. Every message is validated before
// any blob is written: a rejected message is an *Invalid.
func (c *Config) Rows(ctx context.Context, n int, msg func(i int) *Message) ([]store.NewMessage, []string, []Blob, error) {
	rows := make([]store.NewMessage, n)
	ids := make([]string, n)
	trace := TraceHeaders(ctx)
	var blobs []Blob
	for i := range n {
		m := msg(i)
		limit, claimed := c.MaxPayloadBytes, c.ClaimCheck.Claims(m)
		if claimed {
			limit = c.ClaimCheck.MaxPayloadBytes
		}
		r, err := Prepare(m, i, limit, trace)
		if err != nil {
			return nil, nil, nil, err
		}
		if r.ExpiresAt.IsZero() && r.ExpiresIn == 0 {
			r.ExpiresIn = c.TTL
		}
		if err := c.Seal.Row(ctx, i, &r, m, limit); err != nil {
			return nil, nil, nil, err
		}
		if claimed {
			b, err := c.ClaimCheck.Claim(&r, m, c.Seal.Seals(m))
			if err != nil {
				return nil, nil, nil, err
			}
			blobs = append(blobs, b)
		}
		rows[i], ids[i] = r, r.MessageID
	}
	return rows, ids, blobs, nil
}

// Notifier wakes relays Interval after a producer's rows are in — in this
// process directly, elsewhere through the database when it can
// (PostgreSQL NOTIFY, on the producer's own connection, outside the
// caller's transaction) unless Local — coalescing every Enqueue of that
// window into one signal. The delay gives the caller's transaction time
// to commit; a relay woken too early finds the message on its next poll,
// 5 to 25 ms later.
type Notifier struct {
	Backend  *store.Backend
	Interval time.Duration
	// Local: wake the relays of this process only.
	Local bool

	mu      sync.Mutex
	pending bool
}

// Signal schedules the signal, unless one is scheduled already.
func (n *Notifier) Signal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pending {
		return
	}
	n.pending = true
	time.AfterFunc(n.Interval, func() {
		n.mu.Lock()
		n.pending = false
		n.mu.Unlock()
		n.Backend.Local.Wake()
		if n.Backend.Notify != nil && !n.Local {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = n.Backend.Notify(ctx)
		}
	})
}
