package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txoutbox/outbox/internal/enqueue"
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

// engine is the configuration as the enqueue path runs it.
func (c *Config) engine() enqueue.Config {
	return enqueue.Config{
		MaxPayloadBytes: c.MaxPayloadBytes,
		NotifyInterval:  c.NotifyInterval,
		TTL:             c.TTL,
		Seal:            (*enqueue.Seal)(c.Seal),
		ClaimCheck:      (*enqueue.ClaimCheck)(c.ClaimCheck),
	}
}

// Producer enqueues messages inside the caller's transactions.
type Producer[TTx any] struct {
	driver  Driver[TTx]
	backend *store.Backend
	cfg     Config
	enc     enqueue.Config
	notify  *enqueue.Notifier
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
	if err := c.engine().Validate(); err != nil {
		return nil, err
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.NotifyInterval == 0 {
		c.NotifyInterval = DefaultNotifyInterval
	}
	b, err := backendOf("NewProducer", driver)
	if err != nil {
		return nil, err
	}
	e := c.engine()
	e.ClaimCheck = e.ClaimCheck.WithDefaults(DefaultClaimCheckThreshold, DefaultClaimCheckMaxPayloadBytes)
	return &Producer[TTx]{driver: driver, backend: b, cfg: c, enc: e,
		notify: &enqueue.Notifier{Backend: b, Interval: c.NotifyInterval, Local: c.DisableNotify}}, nil
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
	rows, ids, blobs, err := p.enc.Rows(ctx, len(msgs), func(i int) *enqueue.Message { return (*enqueue.Message)(&msgs[i]) })
	if err != nil {
		return nil, validationError(err)
	}
	// The blobs go first: a row never references a blob not yet written.
	// If the rows do not follow (an error, a rollback), the blobs are
	// orphans, which the relay's sweep removes.
	if err := p.enc.ClaimCheck.Put(ctx, blobs); err != nil {
		return nil, err
	}
	if err := p.backend.Store.InsertThen(ctx, p.driver.UnwrapExecutor(tx), rows, p.notify.Signal, ErrDuplicateMessageID); err != nil {
		var dup *store.DuplicateError
		if errors.As(err, &dup) {
			return nil, fmt.Errorf("outbox: %w: %v", ErrDuplicateMessageID, dup.MessageIDs)
		}
		return nil, fmt.Errorf("outbox: enqueue: %w", err)
	}
	return ids, nil
}
