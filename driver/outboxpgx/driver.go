// Package outboxpgx is the outbox driver for PostgreSQL through pgx v5.
//
//	drv := outboxpgx.New(pool)
//	producer, _ := outbox.NewProducer(drv, nil)
//	relay, _ := outbox.NewRelay(drv, &outbox.RelayConfig{...})
//
// Relays wake on LISTEN/NOTIFY: a producer signals relays at most once per
// notify interval, outside the caller's transaction, so commits never wait
// on the notification queue lock.
package outboxpgx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox/internal/store"
)

// Driver runs the outbox over a pgx pool; Enqueue takes a pgx.Tx.
type Driver struct {
	pool    *pgxpool.Pool
	backend *store.Backend
}

// New returns a driver over pool. The pool is the caller's; the driver never
// closes it.
func New(pool *pgxpool.Pool) *Driver {
	d := &Driver{pool: pool}
	d.backend = &store.Backend{
		Store:   store.New(store.Postgres, store.PGX(pool)),
		Session: func(ctx context.Context) (store.Session, error) { return store.PGXSession(ctx, pool) },
		Listen:  d.listen,
		Notify: func(ctx context.Context) error {
			_, err := pool.Exec(ctx, "SELECT pg_notify($1, '')", store.NotifyChannel)
			return err
		},
	}
	return d
}

// Backend is for the outbox package.
func (d *Driver) Backend() *store.Backend { return d.backend }

// TxQuerier is for the outbox package.
func (d *Driver) TxQuerier(tx pgx.Tx) store.Querier { return store.PGX(tx) }

// InTx runs fn in a new pool transaction, committing when it returns nil.
func (d *Driver) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, d.pool, fn)
}

func (d *Driver) listen(ctx context.Context, wake func()) error {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries a LISTEN: never hand it back to the pool.
	conn := c.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	return store.ListenPGX(ctx, conn, wake)
}
