package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
)

// Producer defaults.
const (
	// DefaultMaxPayloadBytes is the largest payload Enqueue accepts (1 MiB).
	DefaultMaxPayloadBytes = relay.DefaultMaxPayloadBytes
	// DefaultNotifyInterval is how long after an Enqueue a producer
	// signals relays, coalescing the Enqueues of that window.
	DefaultNotifyInterval = 5 * time.Millisecond
)

// Config configures a Producer.
type Config struct {
	// MaxPayloadBytes is the largest payload Enqueue accepts. Defaults to
	// DefaultMaxPayloadBytes (1 MiB).
	MaxPayloadBytes int
	// NotifyInterval is how long after an Enqueue relays are signalled,
	// and so the shortest gap between two signals: every Enqueue within the
	// window shares one. Relays in this process are woken directly, others
	// by PostgreSQL NOTIFY sent outside the caller's transaction, so commits
	// never queue behind it. Relays poll as well, so a lost or early signal
	// only costs latency. Defaults to DefaultNotifyInterval (5 ms).
	NotifyInterval time.Duration
	// DisableNotify stops the producer from signalling relays in other
	// processes; they find new messages by polling.
	DisableNotify bool
	// Seal, when set, encrypts payloads before they are written (see
	// SealConfig and package seal). Defaults to nil: payloads are stored
	// as they are.
	Seal *SealConfig
	// ClaimCheck, when set, writes payloads over its threshold to a blob
	// store at Enqueue and leaves a reference in the row (see
	// ClaimCheckConfig and package claimcheck). Defaults to nil: every
	// payload is stored in the row.
	ClaimCheck *ClaimCheckConfig
	// TTL expires every message this long after its enqueue (database
	// time) unless the message sets ExpiresAt or TTL itself: for messages
	// that are worthless once late (a one-time code, a price quote).
	// Defaults to 0: messages do not expire.
	TTL time.Duration
}

func (c *Config) validate() error {
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
		if err := c.Seal.validate(); err != nil {
			return err
		}
	}
	if c.ClaimCheck != nil {
		return c.ClaimCheck.validate()
	}
	return nil
}

// Producer enqueues messages inside the caller's transactions.
type Producer[TTx any] struct {
	driver  Driver[TTx]
	backend *store.Backend
	cfg     Config

	notifyMu      sync.Mutex
	notifyPending bool
}

// NewProducer returns a Producer writing through driver. cfg may be nil.
func NewProducer[TTx any](driver Driver[TTx], cfg *Config) (*Producer[TTx], error) {
	if driver == nil {
		return nil, errors.New("outbox: NewProducer: nil driver")
	}
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.NotifyInterval == 0 {
		c.NotifyInterval = DefaultNotifyInterval
	}
	c.ClaimCheck = c.ClaimCheck.withDefaults()
	b, err := backendOf("NewProducer", driver)
	if err != nil {
		return nil, err
	}
	return &Producer[TTx]{driver: driver, backend: b, cfg: c}, nil
}

// Enqueue writes msg in tx and returns its message id. The message becomes
// deliverable when tx commits; if tx rolls back, it never existed.
//
// msg is validated before anything is written: a *ValidationError leaves tx
// untouched and usable.
func (p *Producer[TTx]) Enqueue(ctx context.Context, tx TTx, msg Message) (string, error) {
	ids, err := p.EnqueueMany(ctx, tx, []Message{msg})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// EnqueueMany writes msgs in tx with as few statements as their size
// allows, in order (so messages with the same key are delivered in slice
// order), and returns their message ids. Every message is validated before
// any is written; one invalid message rejects the call.
func (p *Producer[TTx]) EnqueueMany(ctx context.Context, tx TTx, msgs []Message) ([]string, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	rows := make([]store.NewMessage, len(msgs))
	ids := make([]string, len(msgs))
	trace := traceHeaders(ctx)
	var blobs []blob
	for i := range msgs {
		limit, claimed := p.cfg.MaxPayloadBytes, p.cfg.ClaimCheck.claims(&msgs[i])
		if claimed {
			limit = p.cfg.ClaimCheck.MaxPayloadBytes
		}
		r, err := msgs[i].prepare(i, limit, trace)
		if err != nil {
			return nil, err
		}
		if r.ExpiresAt.IsZero() && r.ExpiresIn == 0 {
			r.ExpiresIn = p.cfg.TTL
		}
		if err := p.sealRow(ctx, i, &r, &msgs[i], limit); err != nil {
			return nil, err
		}
		if claimed {
			b, err := p.claimRow(&r, &msgs[i], p.sealsMessage(&msgs[i]))
			if err != nil {
				return nil, err
			}
			blobs = append(blobs, b)
		}
		rows[i], ids[i] = r, r.MessageID
	}
	// The blobs go first: a row never references a blob not yet written.
	// If the rows do not follow (an error, a rollback), the blobs are
	// orphans, which the relay's sweep removes.
	if err := p.putBlobs(ctx, blobs); err != nil {
		return nil, err
	}
	if err := p.backend.Store.InsertThen(ctx, p.driver.UnwrapExecutor(tx), rows, p.signal, ErrDuplicateMessageID); err != nil {
		var dup *store.DuplicateError
		if errors.As(err, &dup) {
			return nil, fmt.Errorf("outbox: %w: %v", ErrDuplicateMessageID, dup.MessageIDs)
		}
		return nil, fmt.Errorf("outbox: enqueue: %w", err)
	}
	return ids, nil
}

// signal wakes relays NotifyInterval after the rows are in — in this
// process directly, elsewhere through the database when it can (PostgreSQL
// NOTIFY, on the producer's own connection, outside the caller's
// transaction) — coalescing every Enqueue of that window into one signal.
// The delay gives the caller's transaction time to commit; a relay woken
// too early finds the message on its next poll, 5 to 25 ms later.
func (p *Producer[TTx]) signal() {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	if p.notifyPending {
		return
	}
	p.notifyPending = true
	time.AfterFunc(p.cfg.NotifyInterval, func() {
		p.notifyMu.Lock()
		p.notifyPending = false
		p.notifyMu.Unlock()
		p.backend.Local.Wake()
		if p.backend.Notify != nil && !p.cfg.DisableNotify {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = p.backend.Notify(ctx)
		}
	})
}
