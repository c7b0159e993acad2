package outboxpgx

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txoutbox/outbox/driver"
)

// Batched is the Driver's pipelined form: its transaction type is the
// caller's own *pgx.Batch. A Producer over it queues each message's insert
// on the batch, next to the caller's statements, instead of running it:
// the business statements and the outbox rows then travel to PostgreSQL
// in one round trip when the caller sends the batch in its transaction.
//
//	producer, err := outbox.NewProducer(drv.Batched(), nil)
//	…
//	batch := &pgx.Batch{}
//	batch.Queue("UPDATE accounts SET plan = 'pro' WHERE id = $1", 7)
//	id, err := producer.Enqueue(ctx, batch, msg) // queued, not sent
//	err = tx.SendBatch(ctx, batch).Close()       // one round trip
//	err = tx.Commit(ctx)
//
// Enqueue validates the messages and queues their inserts; nothing reaches
// the database before the batch is sent, and a message whose batch is not
// sent, or whose transaction rolls back, never existed. A duplicate
// Message.ID the caller chose is reported by the batch (BatchResults.Close
// or the Exec that reads its result) as an error matching
// outbox.ErrDuplicateMessageID; like Enqueue's, it leaves the transaction
// usable. The producer's wake-up (relays in this process directly, others
// by NOTIFY outside the transaction) is armed when the batch's results
// are read, once the rows are written, and fires NotifyInterval later,
// as Enqueue's fires NotifyInterval after its insert: that is the window
// the commit has to land in. A relay woken before the commit finds the
// messages on its next poll. Relays and migrations keep the Driver itself.
type Batched struct{ d *Driver }

var (
	_ driver.Driver[*pgx.Batch] = (*Batched)(nil)
	_ driver.Listener           = (*Batched)(nil)
)

// Batched returns the driver's pipelined form, over the same pool.
func (d *Driver) Batched() *Batched { return &Batched{d} }

// Dialect is driver.Postgres.
func (b *Batched) Dialect() driver.Dialect { return driver.Postgres }

// Executor runs statements on the pool, as the Driver's does.
func (b *Batched) Executor() driver.Executor { return b.d.Executor() }

// UnwrapExecutor queues the outbox's inserts on batch. It runs nothing
// else: a statement that needs its result at once (Exec, Query) fails.
func (b *Batched) UnwrapExecutor(batch *pgx.Batch) driver.Executor { return queuer{batch} }

// InTx runs fn with a new batch, then sends the batch in a new pool
// transaction and commits it when every result was read without error.
func (b *Batched) InTx(ctx context.Context, fn func(batch *pgx.Batch) error) error {
	batch := &pgx.Batch{}
	if err := fn(batch); err != nil {
		return err
	}
	return b.d.InTx(ctx, func(tx pgx.Tx) error { return tx.SendBatch(ctx, batch).Close() })
}

// Session acquires a connection from the pool.
func (b *Batched) Session(ctx context.Context) (driver.Session, error) { return b.d.Session(ctx) }

// Identity is the pool, as the Driver's: producers over either form wake
// the relays of the pool in process.
func (b *Batched) Identity() any { return b.d.Identity() }

// SupportsListen is true, as the Driver's.
func (b *Batched) SupportsListen() bool { return true }

// Listen is the Driver's Listen.
func (b *Batched) Listen(ctx context.Context, channel string, wake func()) error {
	return b.d.Listen(ctx, channel, wake)
}

// Notify is the Driver's Notify, on a pool connection.
func (b *Batched) Notify(ctx context.Context, channel string) error {
	return b.d.Notify(ctx, channel)
}

// errQueued is what a batch's executor answers to a statement whose
// result is needed before the batch is sent.
var errQueued = errors.New("outboxpgx: a *pgx.Batch only takes the outbox's inserts; use the Driver for this call")

// queuer is the Executor of a batch. The outbox's insert finds it by its
// QueueExec method (driver.Queuer) and queues its
// statements there; check runs with the rows each one changed when the
// caller reads the batch's results, and its error is the batch's.
type queuer struct{ b *pgx.Batch }

var _ driver.Queuer = queuer{}

func (q queuer) QueueExec(sql string, args []any, check func(rowsAffected int64) error) {
	q.b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error { return check(ct.RowsAffected()) })
}

func (queuer) Exec(context.Context, string, ...any) (int64, error) { return 0, errQueued }

func (queuer) Query(context.Context, string, ...any) (driver.Rows, error) { return nil, errQueued }
