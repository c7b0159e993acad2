package store

import (
	"context"
	"time"
)

// dialect is everything that differs between the databases, one value per
// database (postgres, mysql and sqlite, each in its statements_*.go file)
// chosen once, by New: the fixed statements, the fragments the operator
// queries are put together from, how lists of arguments travel, and the
// few steps whose shape differs (a batch insert, the settle, archiving,
// the migrations lock).
type dialect interface {
	// statements are the dialect's fixed statements.
	statements() statements
	// retention are its retention statements over outbox_messages.
	retention() retentionStatements

	// ph is the n-th (1-based) placeholder.
	ph(n int) string
	// now is the database's current time in the column representation.
	now() string
	// epoch renders a timestamp column as float seconds since the Unix
	// epoch.
	epoch(col string) string
	// text renders message_id or headers as text (uuid and jsonb columns
	// on PostgreSQL).
	text(col string) string
	// falseSQL is the literal stored in a boolean column for false.
	falseSQL() string
	// preview is the first n characters of col.
	preview(col string, n int) string
	// msgIDEq is "message_id = {}" in the form that uses the unique index.
	msgIDEq() string
	// timeArg converts t to the argument compared with a timestamp
	// column, and the SQL expression ("{}" for the placeholder) that
	// reads it.
	timeArg(t time.Time) (string, any)
	// createdRange narrows the bounds Since <= created_at < Until to what
	// the column can hold; none means no row can match.
	createdRange(since, until time.Time) (s, u time.Time, none bool)
	// messageIDsIn is "message_id is one of ids" (ids are valid UUIDs),
	// with a "{}" per argument.
	messageIDsIn(ids []string) (string, []any)
	// messageIDTextIn is "message_id, as text, is one of ids" (ids are
	// any strings), with a "{}" per argument.
	messageIDTextIn(ids []string) (string, []any)
	// idsIn is "id is one of ids", with a "{}" per argument.
	idsIn(ids []int64) (string, []any)
	// searchStatus is how Search selects the status literal: a hint
	// added after the table name and the predicate. pending and byTopic
	// say whether the status is pending and the search names a topic.
	searchStatus(status string, pending, byTopic bool) (hint, pred string)

	// intList renders partition numbers as the dialect's list argument.
	intList(v []int) any
	// idList renders message row ids as the dialect's list argument.
	idList(v []int64) any
	// insertOneArgs are the arguments of the insertOne statement for m.
	insertOneArgs(m *NewMessage) []any
	// insertBatch runs the insert statement stmt for msgs (more than
	// one) through q and reports ids that exist already as a
	// *DuplicateError.
	insertBatch(ctx context.Context, q Querier, stmt string, msgs []NewMessage) error
	// settle runs the settle statement stmt once and returns how many
	// rows it changed.
	settle(ctx context.Context, q Querier, stmt, owner string, outs []Outcome) (int64, error)
	// inflightArgs are the arguments of the markInflight statement.
	inflightArgs(owner string, parts []int, maxIDs []int64) ([]any, error)

	// archive moves the due rows among ids into the archive, atomically,
	// with the statements s; sent and dead are the retentions in
	// microseconds.
	archive(ctx context.Context, st *Store, s retentionStatements, ids []int64, sent, dead int64) (int64, error)
	// lockMigrations takes the lock that serialises migrations over s and
	// returns its release.
	lockMigrations(ctx context.Context, s Session) (func(), error)
	// pool is the executor the store runs its own statements through over
	// db, its pool (never a caller's transaction).
	pool(db Querier) Querier
}

// dialectOf is the dialect value of d; SQLite's for a name New does not
// know (ParseDialect refuses those).
func dialectOf(d Dialect) dialect {
	switch d {
	case Postgres:
		return postgres{}
	case MySQL:
		return mysql{}
	}
	return sqlite{}
}

// Now is the database's current time as the outbox's own tables hold it:
// the SQL expression their timestamp columns are set to and compared with.
func (d Dialect) Now() string { return dialectOf(d).now() }

// Later is Now plus the microseconds the SQL expression us holds.
func (d Dialect) Later(us string) string {
	switch d {
	case Postgres:
		return "now() + (" + us + ")::bigint * interval '1 microsecond'"
	case MySQL:
		return "NOW(6) + INTERVAL (" + us + ") MICROSECOND"
	}
	return sqliteShift("+", us)
}
