// Package redisinbox is a best-effort inbox in Redis, for consumers that
// have no database of their own.
//
// It is NOT exactly-once: the effect and the dedupe mark cannot commit
// together. Handle marks the message id "processing" (SET NX with a short
// lock TTL), runs the handler, then marks it "done" for the retention
// period. What can go wrong:
//
//   - the consumer dies after the handler's effect took place but before
//     "done" was written: the lock expires after LockTTL and a redelivery
//     applies the effect a second time;
//   - the handler runs longer than LockTTL: a concurrent redelivery may run
//     it in parallel;
//   - Redis loses the mark (a restart without persistence, a failover to a
//     replica that had not received it, eviction under maxmemory): a later
//     redelivery applies the effect again;
//   - the retention expires while the producer still redelivers (keep it
//     longer than the producer's retry horizon).
//
// Prefer the database inbox (package inbox) whenever the effect lives in a
// database; use this one for effects that are themselves idempotent enough
// to tolerate the rare double (a notification, a cache refresh).
package redisinbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults.
const (
	// DefaultLockTTL is how long a message stays locked while its handler
	// runs.
	DefaultLockTTL = 30 * time.Second
	// DefaultRetention is how long a done mark is kept.
	DefaultRetention = 7 * 24 * time.Hour
)

// Config configures an Inbox.
type Config struct {
	// Consumer names the consumer; marks are kept per consumer. Required.
	Consumer string
	// KeyPrefix prefixes every key. Defaults to "outbox:inbox:".
	KeyPrefix string
	// LockTTL bounds a handler run (see the package comment). Defaults to
	// DefaultLockTTL.
	LockTTL time.Duration
	// Retention is how long a done mark is kept. Defaults to
	// DefaultRetention (7 days).
	Retention time.Duration
}

// Inbox dedupes deliveries in Redis.
type Inbox struct {
	rdb redis.UniversalClient
	cfg Config
}

// New returns an Inbox over the caller's Redis client.
func New(rdb redis.UniversalClient, cfg *Config) (*Inbox, error) {
	if rdb == nil {
		return nil, errors.New("redisinbox: nil client")
	}
	if cfg == nil || cfg.Consumer == "" {
		return nil, errors.New("redisinbox: Config.Consumer is required")
	}
	c := *cfg
	if c.LockTTL < 0 || c.Retention < 0 {
		return nil, errors.New("redisinbox: Config.LockTTL and Retention must not be negative")
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "outbox:inbox:"
	}
	if c.LockTTL == 0 {
		c.LockTTL = DefaultLockTTL
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Retention <= c.LockTTL {
		return nil, errors.New("redisinbox: Config.Retention must be longer than LockTTL")
	}
	return &Inbox{rdb: rdb, cfg: c}, nil
}

func (ib *Inbox) key(id string) string { return ib.cfg.KeyPrefix + ib.cfg.Consumer + ":" + id }

// Handle runs fn unless messageID was already handled (or is being handled
// right now) and returns whether fn ran. An fn error removes the lock so
// a redelivery runs fn again; the error is returned.
func (ib *Inbox) Handle(ctx context.Context, messageID string, fn func(ctx context.Context) error) (bool, error) {
	if messageID == "" {
		return false, errors.New("redisinbox: empty message id")
	}
	k := ib.key(messageID)
	ok, err := ib.rdb.SetNX(ctx, k, "processing", ib.cfg.LockTTL).Result()
	if err != nil {
		return false, fmt.Errorf("redisinbox: lock %s: %w", messageID, err)
	}
	if !ok {
		return false, nil
	}
	if err := fn(ctx); err != nil {
		if derr := ib.rdb.Del(context.WithoutCancel(ctx), k).Err(); derr != nil {
			return false, fmt.Errorf("%w (and releasing the lock failed: %v)", err, derr)
		}
		return false, err
	}
	if err := ib.rdb.Set(context.WithoutCancel(ctx), k, "done", ib.cfg.Retention).Err(); err != nil {
		// The effect happened; only the mark's lifetime is short (LockTTL).
		return true, fmt.Errorf("redisinbox: mark %s done: %w", messageID, err)
	}
	return true, nil
}
