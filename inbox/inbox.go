// Package inbox gives consumers exactly-once effects on top of the
// relay's at-least-once delivery.
//
// The relay delivers every message at least once; after a crash or a lost
// confirmation it delivers some twice. A consumer that records each
// message id in the same database transaction as the effect the message
// causes applies every message exactly once: a second delivery finds the
// record and is acknowledged without running the effect again.
//
//	drv, err := outboxpgx.New(pool, nil)
//	...
//	ib, err := inbox.New(drv, &inbox.Config{Consumer: "inventory"})
//	applied, err := ib.Handle(ctx, msg.ID, func(ctx context.Context, tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, "UPDATE stock SET reserved = reserved + $1 WHERE sku = $2", qty, sku)
//		return err
//	})
//	// err == nil: acknowledge the delivery (applied says whether it ran now).
//	// err != nil: do not acknowledge; the broker redelivers and nothing was recorded.
//
// The record lives in outbox_inbox (consumer, message_id, processed_at),
// created by `outbox migrate`. The id is inserted first, under its primary
// key: when several instances of a consumer get the same message at once,
// one inserts and runs the effect, the others wait for it to commit and
// then skip — or, if it rolls back, one of them takes over.
//
// Records are needed only while the same message can still arrive again;
// Purge removes older ones. Keep them at least as long as the producer's
// retry horizon (see outbox.RetryPolicy.Horizon), plus the time an operator
// may take to requeue a dead message.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/internal/backoff"
	"github.com/txoutbox/outbox/internal/store"
)

// Defaults.
const (
	// DefaultRetention is how long records are kept by Purge.
	DefaultRetention = 7 * 24 * time.Hour
)

// Config configures an Inbox.
type Config struct {
	// Consumer names the consuming service (or handler): message ids are
	// deduplicated per consumer, so two services can both process a
	// message. Required, 1–255 characters.
	Consumer string
	// Retention is how long Purge keeps records. It must be longer than
	// RetryHorizon. Defaults to DefaultRetention (7 days).
	Retention time.Duration
	// RetryHorizon is how long the producer may keep redelivering a
	// message: its retry policy's Horizon(max attempts), plus any time
	// before an operator requeues dead messages. Defaults to the default
	// policy's horizon for 10 attempts, plus one day for requeues.
	RetryHorizon time.Duration
}

// Inbox dedupes deliveries for one consumer.
type Inbox[TTx any] struct {
	driver driver.Driver[TTx]
	st     *store.Store
	cfg    Config
}

// ErrRetentionTooShort: Config.Retention does not outlast the retry
// horizon, so a late redelivery could apply a message twice.
var ErrRetentionTooShort = errors.New("inbox: retention shorter than the producer's retry horizon")

// New returns an Inbox over the driver d (outboxpgx or outboxsql). The
// outbox_inbox table must exist (`outbox migrate`).
func New[TTx any](d driver.Driver[TTx], cfg *Config) (*Inbox[TTx], error) {
	if d == nil {
		return nil, errors.New("inbox: nil driver")
	}
	if cfg == nil {
		return nil, errors.New("inbox: nil Config: Consumer is required")
	}
	c := *cfg
	if c.Consumer == "" || len(c.Consumer) > 255 {
		return nil, errors.New("inbox: Config.Consumer must be 1-255 characters")
	}
	if c.Retention < 0 || c.RetryHorizon < 0 {
		return nil, errors.New("inbox: Config.Retention and RetryHorizon must not be negative")
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.RetryHorizon == 0 {
		c.RetryHorizon = backoff.Policy{}.Horizon(10) + 24*time.Hour
	}
	if c.Retention <= c.RetryHorizon {
		return nil, fmt.Errorf("%w: Retention %v ≤ RetryHorizon %v", ErrRetentionTooShort, c.Retention, c.RetryHorizon)
	}
	return &Inbox[TTx]{driver: d, st: store.NewBackend(d).Store, cfg: c}, nil
}

// Consumer is the consumer name records are kept under.
func (ib *Inbox[TTx]) Consumer() string { return ib.cfg.Consumer }

// Claim records messageID in tx and reports whether this is its first
// delivery. On false the caller skips the effect (it was applied by an
// earlier, committed delivery) and still acknowledges the message. The
// record commits or rolls back with tx.
func (ib *Inbox[TTx]) Claim(ctx context.Context, tx TTx, messageID string) (bool, error) {
	if messageID == "" || len(messageID) > 64 {
		return false, fmt.Errorf("inbox: message id %q: want 1-64 characters", messageID)
	}
	first, err := ib.st.InboxClaim(ctx, ib.driver.UnwrapExecutor(tx), ib.cfg.Consumer, messageID)
	if err != nil {
		return false, fmt.Errorf("inbox: claim %s: %w", messageID, err)
	}
	return first, nil
}

// Handle applies a delivery exactly once: in one new transaction it
// records messageID and runs fn. It returns (true, nil) when fn ran and
// committed, (false, nil) for a repeat delivery (fn not called), and an
// error when fn or the database failed — then nothing was recorded and the
// delivery should not be acknowledged, so the broker redelivers it.
func (ib *Inbox[TTx]) Handle(ctx context.Context, messageID string, fn func(ctx context.Context, tx TTx) error) (bool, error) {
	applied := false
	err := ib.driver.InTx(ctx, func(tx TTx) error {
		first, err := ib.Claim(ctx, tx, messageID)
		if err != nil || !first {
			return err
		}
		if err := fn(ctx, tx); err != nil {
			return err
		}
		applied = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return applied, nil
}

// Purge deletes this consumer's records older than Config.Retention and
// returns how many it deleted. Run it now and then (daily is plenty).
func (ib *Inbox[TTx]) Purge(ctx context.Context) (int64, error) {
	n, err := ib.st.InboxPurge(ctx, ib.cfg.Consumer, ib.cfg.Retention)
	if err != nil {
		return n, fmt.Errorf("inbox: purge: %w", err)
	}
	return n, nil
}
