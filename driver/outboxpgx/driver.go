// Package outboxpgx is the outbox driver for PostgreSQL through pgx v5.
//
//	drv, err := outboxpgx.New(pool, nil)
//	producer, err := outbox.NewProducer(drv, nil)
//	relay, err := outbox.NewRelay(drv, &outbox.RelayConfig{...})
//
// Relays wake on LISTEN/NOTIFY: a producer signals relays at most once per
// notify interval, outside the caller's transaction, so commits never wait
// on the notification queue lock. Producers and relays over the same pool
// also wake each other in process, whether they share one Driver or each
// built their own.
package outboxpgx

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/internal/pg"
)

// Config tunes a Driver; nil means the zero Config.
type Config struct {
	// Listener, when set, is where the driver's Listen subscribes:
	// drivers given the same SharedListener listen over one connection.
	// Give it only to drivers whose pools reach one database of one
	// server, each with its outbox in its own schema (a tenant per
	// schema). Nil: each driver's Listen takes a connection of its own.
	Listener *SharedListener
}

// Driver runs the outbox over a pgx pool; Enqueue takes a pgx.Tx. It
// implements driver.Driver[pgx.Tx] and driver.Listener.
type Driver struct {
	pool   *pgxpool.Pool
	shared *SharedListener
}

// SharedListener lets the drivers of many schemas of one database (see
// Config.Listener) wait for their producers' signals over one
// connection instead of one each. NOTIFY channels belong to the
// database, not the schema, so with a connection per schema every
// signal reaches every schema's connection; over a SharedListener it is
// read once and wakes only the relay of the schema it names. The
// connection is taken from the pool of the first driver that listens
// and closed when the last one stops; if it fails, every driver's
// Listen returns the error and the relays listen again, as over their
// own connections. The zero SharedListener is ready to use.
type SharedListener struct {
	s pg.Shared
}

// Listening is the number of connections l holds: one per channel while
// any driver listens on it.
func (l *SharedListener) Listening() int { return l.s.Listening() }

var (
	_ driver.Driver[pgx.Tx] = (*Driver)(nil)
	_ driver.Listener       = (*Driver)(nil)
)

// New returns a driver over pool; cfg may be nil. The pool is the
// caller's; the driver never closes it.
func New(pool *pgxpool.Pool, cfg *Config) (*Driver, error) {
	if pool == nil {
		return nil, errors.New("outboxpgx: nil *pgxpool.Pool")
	}
	d := &Driver{pool: pool}
	if cfg != nil {
		d.shared = cfg.Listener
	}
	return d, nil
}

// Dialect is driver.Postgres.
func (d *Driver) Dialect() driver.Dialect { return driver.Postgres }

// Executor runs statements on the pool.
func (d *Driver) Executor() driver.Executor { return executor{d.pool} }

// UnwrapExecutor runs statements in the caller's transaction tx.
func (d *Driver) UnwrapExecutor(tx pgx.Tx) driver.Executor { return executor{tx} }

// InTx runs fn in a new pool transaction, committing when it returns nil.
func (d *Driver) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pg.Translate(pgx.BeginFunc(ctx, d.pool, fn))
}

// Session acquires a connection from the pool.
func (d *Driver) Session(ctx context.Context) (driver.Session, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &session{executor{c}, c}, nil
}

// Identity is the pool.
func (d *Driver) Identity() any { return d.pool }

// SupportsListen is true: every PostgreSQL connection can LISTEN.
func (d *Driver) SupportsListen() bool { return true }

// Listen takes a connection out of the pool for good (it carries the
// LISTEN, so it is closed rather than handed back) and waits on it; with
// Config.Listener, it subscribes to that listener's connection instead.
// It returns driver.ErrNoSignals when a check signal sent from another
// pool connection does not arrive within seconds (the pool leads to a
// pooler in transaction mode).
func (d *Driver) Listen(ctx context.Context, channel string, wake func()) error {
	if d.shared != nil {
		c := pg.Conn{Connect: d.takeConn, Notify: d.probe}
		if err := d.pool.QueryRow(ctx, pg.SubscriberSQL).Scan(&c.Schema, &c.Database); err != nil {
			return err
		}
		return d.shared.s.Listen(ctx, channel, c, wake)
	}
	conn, err := d.takeConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pg.Listen(ctx, conn, channel, wake, func(ctx context.Context, payload string) error {
		return d.probe(ctx, channel, payload)
	})
}

// takeConn takes a connection out of the pool for good.
func (d *Driver) takeConn(ctx context.Context) (*pgx.Conn, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return c.Hijack(), nil
}

// probe sends the listening connection's check signal from a pool
// connection.
func (d *Driver) probe(ctx context.Context, channel, payload string) error {
	_, err := d.pool.Exec(ctx, pg.ProbeSQL, channel, payload)
	return err
}

// Notify runs pg_notify on a pool connection.
func (d *Driver) Notify(ctx context.Context, channel string) error {
	_, err := d.pool.Exec(ctx, pg.NotifySQL, channel)
	return err
}
