package bench

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/driver/outboxsql"
)

// conn runs the bench's transactions the way an application would: pgx
// transactions on PostgreSQL, *sql.Tx elsewhere.
type conn interface {
	// inTx runs fn in a transaction and commits it; it returns once the
	// commit has returned. A transaction, once begun, runs to its end even
	// when ctx is cancelled (see detach): fn gets the transaction's own
	// context, and callers check ctx between transactions.
	inTx(ctx context.Context, fn func(ctx context.Context, tx txn) error) error
	migrate(ctx context.Context) error
	newRelay(cfg *outbox.RelayConfig) (*outbox.Relay, error)
	// newEnqueuer returns an enqueue through a producer of its own, made
	// with cfg (sealing, a claim check).
	newEnqueuer(cfg *outbox.Config) (enqueuer, error)
}

// enqueuer writes msgs in tx through a producer of its own.
type enqueuer func(ctx context.Context, tx txn, msgs []outbox.Message) ([]string, error)

// txn is one open transaction.
type txn interface {
	exec(ctx context.Context, sql string, args ...any) error
	// enqueue writes msgs with the producer that signals other processes
	// (notify) or the one that does not.
	enqueue(ctx context.Context, notify bool, msgs []outbox.Message) ([]string, error)
}

// writeTimeout bounds a write that no longer follows its caller's
// cancellation.
const writeTimeout = time.Minute

// detach returns a context for a write that must not be cut short by an
// interrupt. A cancelled transaction or statement can still commit on the
// server after the client gave up on it, and rows it inserted would then
// land after the run's cleanup deleted the run's rows; so writes run to
// their end and the cleanup comes after them.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
}

// outboxConn is what every conn does through its outbox driver alone:
// its two producers, migrations and relays.
type outboxConn[TTx any] struct {
	drv   outbox.Driver[TTx]
	quiet *outbox.Producer[TTx] // DisableNotify
	loud  *outbox.Producer[TTx] // default Config
}

func newOutboxConn[TTx any](drv outbox.Driver[TTx]) (outboxConn[TTx], error) {
	quiet, err := outbox.NewProducer(drv, &outbox.Config{DisableNotify: true})
	if err != nil {
		return outboxConn[TTx]{}, err
	}
	loud, err := outbox.NewProducer(drv, nil)
	if err != nil {
		return outboxConn[TTx]{}, err
	}
	return outboxConn[TTx]{drv: drv, quiet: quiet, loud: loud}, nil
}

func (o outboxConn[TTx]) pick(notify bool) *outbox.Producer[TTx] {
	if notify {
		return o.loud
	}
	return o.quiet
}

func (o outboxConn[TTx]) newEnqueuer(cfg *outbox.Config) (enqueuer, error) {
	p, err := outbox.NewProducer(o.drv, cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx txn, msgs []outbox.Message) ([]string, error) {
		rt, ok := tx.(interface{ raw() TTx })
		if !ok {
			return nil, fmt.Errorf("bench: a %T is not a transaction of this driver", tx)
		}
		return p.EnqueueMany(ctx, rt.raw(), msgs)
	}, nil
}

func (o outboxConn[TTx]) migrate(ctx context.Context) error {
	_, err := outbox.Migrate(ctx, o.drv, nil)
	return err
}

func (o outboxConn[TTx]) newRelay(cfg *outbox.RelayConfig) (*outbox.Relay, error) {
	return outbox.NewRelay(o.drv, cfg)
}

// pgConn is PostgreSQL through pgx.
type pgConn struct {
	pool *pgxpool.Pool
	outboxConn[pgx.Tx]
	// batched queues the enqueue on the transaction's batch (Batched).
	batched *outbox.Producer[*pgx.Batch]
}

func newPGConn(pool *pgxpool.Pool, drv *outboxpgx.Driver) (*pgConn, error) {
	o, err := newOutboxConn[pgx.Tx](drv)
	if err != nil {
		return nil, err
	}
	batched, err := outbox.NewProducer(drv.Batched(), &outbox.Config{DisableNotify: true})
	if err != nil {
		return nil, err
	}
	return &pgConn{pool: pool, outboxConn: o, batched: batched}, nil
}

func (c *pgConn) inTx(ctx context.Context, fn func(ctx context.Context, tx txn) error) error {
	ctx, cancel := detach(ctx)
	defer cancel()
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error { return fn(ctx, pgTx{c, tx}) })
}

type pgTx struct {
	c  *pgConn
	tx pgx.Tx
}

func (t pgTx) exec(ctx context.Context, sql string, args ...any) error {
	_, err := t.tx.Exec(ctx, sql, args...)
	return err
}

func (t pgTx) raw() pgx.Tx { return t.tx }

func (t pgTx) enqueue(ctx context.Context, notify bool, msgs []outbox.Message) ([]string, error) {
	return t.c.pick(notify).EnqueueMany(ctx, t.tx, msgs)
}

// execEnqueue sends the statement and msgs' inserts in one batch, one
// round trip.
func (t pgTx) execEnqueue(ctx context.Context, msgs []outbox.Message, sql string, args ...any) error {
	batch := &pgx.Batch{}
	batch.Queue(sql, args...)
	if _, err := t.c.batched.EnqueueMany(ctx, batch, msgs); err != nil {
		return err
	}
	return t.tx.SendBatch(ctx, batch).Close()
}

// sqlConn is MySQL/MariaDB and SQLite through database/sql.
type sqlConn struct {
	db *sql.DB
	outboxConn[*sql.Tx]
}

func newSQLConn(db *sql.DB, drv *outboxsql.Driver) (*sqlConn, error) {
	o, err := newOutboxConn[*sql.Tx](drv)
	if err != nil {
		return nil, err
	}
	return &sqlConn{db: db, outboxConn: o}, nil
}

func (c *sqlConn) inTx(ctx context.Context, fn func(ctx context.Context, tx txn) error) error {
	ctx, cancel := detach(ctx)
	defer cancel()
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(ctx, sqlTx{c, tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

type sqlTx struct {
	c  *sqlConn
	tx *sql.Tx
}

func (t sqlTx) exec(ctx context.Context, sql string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, sql, args...)
	return err
}

func (t sqlTx) raw() *sql.Tx { return t.tx }

func (t sqlTx) enqueue(ctx context.Context, notify bool, msgs []outbox.Message) ([]string, error) {
	return t.c.pick(notify).EnqueueMany(ctx, t.tx, msgs)
}
