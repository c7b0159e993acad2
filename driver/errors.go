package driver

import "errors"

// Errors a driver marks its database's errors with (see [Mark]), so the
// outbox recognises them whatever the database and the Go driver.
var (
	// ErrUniqueViolation marks an insert or update refused because it
	// would duplicate a unique key: PostgreSQL SQLSTATE 23505, MySQL error
	// 1062, SQLite SQLITE_CONSTRAINT_UNIQUE or _PRIMARYKEY.
	ErrUniqueViolation = errors.New("unique violation")

	// ErrDeadlock marks a statement or transaction the database aborted to
	// resolve a conflict with a concurrent one, which a retry may pass:
	// PostgreSQL SQLSTATE 40P01 (deadlock) and 40001 (serialization
	// failure), MySQL errors 1213 (deadlock) and 1205 (lock wait timeout),
	// SQLite SQLITE_BUSY_SNAPSHOT.
	ErrDeadlock = errors.New("deadlock or serialization failure")

	// ErrNoSignals is what a [Listener]'s Listen returns when its
	// connection subscribed but a signal sent to check it never arrived:
	// the connection reaches the database through a pooler in
	// transaction mode (PgBouncer), which hands the server connection
	// that carries the subscription to other clients. Relays then poll.
	ErrNoSignals = errors.New("a signal sent to check the listening connection never arrived (a connection pooler in transaction mode?)")
)

// Mark returns err marked with kind (ErrUniqueViolation or ErrDeadlock;
// outboxsql also marks a statement the server stopped at its time limit
// with context.DeadlineExceeded):
// errors.Is(result, kind) holds, errors.Is and errors.As still find what
// err wraps, and the message is err's. Mark(nil, kind) is nil, and an
// error already marked with kind is returned as it is.
func Mark(err, kind error) error {
	if err == nil || errors.Is(err, kind) {
		return err
	}
	return &markedError{err: err, kind: kind}
}

type markedError struct{ err, kind error }

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.kind} }
