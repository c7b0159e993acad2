package driver

import "context"

// Driver connects the outbox to a database through one Go database
// driver. TTx is the transaction type the driver's users hold and pass to
// Producer.Enqueue (pgx.Tx, *sql.Tx, *gorm.DB, …). A Driver is safe for
// concurrent use; it never closes the pool it was given.
type Driver[TTx any] interface {
	// Dialect is the SQL dialect of the database behind the driver. It
	// must not change over the driver's life.
	Dialect() Dialect

	// Executor runs statements on the driver's pool, each in its own
	// implicit transaction (autocommit). The outbox calls it once per
	// producer, relay or operator handle and keeps the result.
	Executor() Executor

	// UnwrapExecutor returns an Executor that runs statements in tx, the
	// caller's open transaction. The outbox uses it for the length of one
	// call and never commits or rolls back tx.
	UnwrapExecutor(tx TTx) Executor

	// InTx runs fn in a new transaction on the driver's pool, committing
	// when fn returns nil and rolling back otherwise; it returns fn's
	// error, or the commit's. Errors are translated as Executor's are.
	InTx(ctx context.Context, fn func(tx TTx) error) error

	// Session takes a dedicated connection from the pool for statements
	// that must share one connection: session locks and the migrations
	// that run under them. The caller closes it.
	Session(ctx context.Context) (Session, error)

	// Identity names the pool the driver runs over, typically its
	// pointer (*pgxpool.Pool, *sql.DB). It must be comparable. Producers
	// and relays whose drivers report equal identities are in the same
	// process over the same database, and wake each other without a
	// round trip through it, however many drivers were built over the
	// pool. Nil opts out: only the driver value itself is then shared.
	Identity() any
}

// Executor runs SQL statements the outbox wrote for the driver's Dialect.
//
// Arguments are nil, string, *string, bool, int, int32, int64, *int32,
// float64, time.Time and *time.Time; on PostgreSQL also slices of those,
// bound as arrays (text[], int4[], int8[], timestamptz[]) as pgx binds
// them. Results scan into pointers to the same types, to any, and to
// sql.Scanner implementations, with database/sql's conversions.
//
// Every error an Executor or its Rows return is translated: see
// [ErrUniqueViolation] and [ErrDeadlock].
type Executor interface {
	// Exec runs a statement that returns no rows and reports how many
	// rows it changed.
	Exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error)
	// Query runs a statement that returns rows. The caller closes them.
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
}

// Rows is the result of Executor.Query, read as database/sql's rows are:
// Next until false, Scan each row, then Err for the error that ended the
// iteration. Close releases the connection and may be called twice.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Session is one connection held for a sequence of statements (Executor on
// it always reaches the same database session) until Close hands it back.
type Session interface {
	Executor
	// InTx runs fn in a transaction on this connection, committing when
	// fn returns nil and rolling back otherwise.
	InTx(ctx context.Context, fn func(Executor) error) error
	// Close returns the connection to its pool.
	Close() error
}

// Listener is an optional capability of a Driver, found by type
// assertion: signalling between processes over the database (PostgreSQL
// LISTEN/NOTIFY). Producers signal after they enqueue; relays listen and
// read at once instead of waiting for their next poll. Without it, relays
// in other processes poll.
type Listener interface {
	// SupportsListen reports whether this driver value can listen and
	// notify; a driver whose support depends on the connection it was
	// given (database/sql over a PostgreSQL driver or not) says so here.
	SupportsListen() bool
	// Listen subscribes a dedicated connection to channel (an SQL
	// identifier) and blocks, calling wake once subscribed and then for
	// every signal, until ctx is done or the connection fails; it returns
	// why it stopped. wake must not block. A Listen that can tell that
	// signals never reach its connection returns [ErrNoSignals].
	Listen(ctx context.Context, channel string, wake func()) error
	// Notify signals every listener on channel, outside any transaction.
	Notify(ctx context.Context, channel string) error
}

// ChangeFeed is a source of wake-ups for a relay whose producers cannot
// signal it (plain SQL, another language, an adopted table, a database
// without LISTEN): it follows the commits of the database, as the MySQL
// and MariaDB binary log tells them (package outboxbinlog), and the relay
// looks for new rows when one may have added some, instead of probing
// the table every ProbeInterval. It is found by type assertion on a
// Driver, or given to the relay (RelayConfig.ChangeFeed).
type ChangeFeed interface {
	// Watch follows the database's commits until ctx is done or the
	// feed is lost, and returns why it stopped (nil once ctx is done).
	// It calls changed once as soon as it follows them (the relay then
	// looks for what committed before), then whenever a transaction that
	// may have inserted rows into table (as the relay names it: the
	// table, without a schema) has committed. A feed may call it for
	// commits that added nothing; it must not miss one that did. changed
	// does not block.
	Watch(ctx context.Context, table string, changed func()) error
}

// Queuer is an optional capability of an [Executor], found by type
// assertion on the Executor that UnwrapExecutor returns for a caller's
// transaction value: the value is a batch of statements the caller sends
// later in its own transaction (outboxpgx's Batched over a *pgx.Batch).
// Enqueue then queues its inserts on the batch instead of running them, so
// they share the round trip of the caller's statements.
//
// QueueExec queues one statement (one of the outbox's single-row inserts;
// args as Exec takes them). check must run, with the number of rows the
// statement changed, when the caller reads the batch's results, and its
// error must become the error of the batch (a duplicate message id is
// reported that way). Until the batch is sent nothing is known, so the
// Executor's Exec and Query may refuse statements whose results are needed
// at once.
type Queuer interface {
	QueueExec(sql string, args []any, check func(rowsAffected int64) error)
}
