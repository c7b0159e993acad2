// Package store holds every SQL statement of the outbox, per dialect, and
// runs them through a driver's executor (package driver). Nothing outside
// this package writes SQL but package adoptstore, whose statements over a
// table the application already writes run on this package's building
// blocks (Pool, ExecRetry, AppendRows).
//
// The files, by job:
//
//   - store.go, dialect.go, plain.go, statements*.go: the types, the
//     dialects (plain.go: what MySQL and SQLite share) and every
//     statement, one file per dialect; query.go: how they run (deadlocks
//     retried, rows scanned).
//   - messages.go, queue.go: the hot path — insert (queue.go: pipelined
//     into the caller's batch), read, mark in flight, settle, expire.
//   - leases.go, relays.go, probe.go: partition ownership, the relays'
//     registry and route health, the idle relay's wake-ups.
//   - admin.go, sealed.go, metrics.go: the operators' queries (counts,
//     searches, dead letters, requeue; sealed.go: the filter of messages
//     sealed under erased keys), the gauges.
//   - inbox.go: the consumer side.
//   - retention.go, partition.go, claimcheck.go: retention, the archive,
//     day partitions, and the claim-check blobs rows still reference.
//   - migrate.go, settings.go, toolfiles.go, migrations/: the schema, its
//     versions and the server's settings, exported for migration tools.
//   - backend.go: a store over a driver (the database handle, LISTEN),
//     and a driver over a table the application already writes
//     (Adopting, TableSource; relay --adopt): package adoptstore reads
//     that table, package adopt has its profiles.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/txoutbox/outbox/driver"
)

// Dialect names a SQL dialect: the store's own copy of driver.Dialect;
// dialectOf maps it onto the store's per-dialect statements and helpers.
type Dialect string

// The supported dialects, as package driver names them.
const (
	Postgres = Dialect(driver.Postgres)
	MySQL    = Dialect(driver.MySQL)
	SQLite   = Dialect(driver.SQLite)
)

// ParseDialect returns the dialect named s (see driver.ParseDialect).
func ParseDialect(s string) (Dialect, error) {
	d, err := driver.ParseDialect(s)
	return Dialect(d), err
}

func quote(s string) string { return "\"" + s + "\"" }

// Statuses of a message.
const (
	StatusPending  = "pending"
	StatusSent     = "sent"
	StatusConsumed = "consumed"
	StatusDead     = "dead"
	// StatusExpired is a message whose expires_at came before it was
	// confirmed (schema version 19): never sent afterwards, requeueable
	// like a dead letter.
	StatusExpired = "expired"
)

// ErrNotFound is returned when a statement addressed a row that is not there.
var ErrNotFound = errors.New("not found")

// Querier runs statements: a driver's executor.
type Querier = driver.Executor

// Rows is the result of a query.
type Rows = driver.Rows

// NewMessage is one row to insert.
type NewMessage struct {
	MessageID   string
	Topic       string
	Key         string // "" stores NULL
	Payload     string
	Headers     string // JSON object
	MaxAttempts int    // 0 keeps the column default
	Delay       time.Duration
	NotBefore   time.Time // zero: now() + Delay
	// ExpiresAt is when the message is no longer delivered if not
	// confirmed by then; zero: never. It needs MessageID.
	ExpiresAt time.Time
	// ExpiresIn, when ExpiresAt is zero, sets it to the database's now()
	// plus this; 0: never. It needs MessageID.
	ExpiresIn time.Duration
	// FreshID says MessageID was generated for this message (a version 7
	// UUID from a random source), so no row can hold it yet: on PostgreSQL
	// the insert skips the conflict check the caller's ids need.
	FreshID bool
}

// Row is a ready message as the relay reads it.
type Row struct {
	ID        int64
	MessageID string
	Topic     string
	Key       string
	HasKey    bool
	Payload   string
	// PayloadBytes is the stored payload's length in bytes, and Oversize
	// says the read left the payload out because it is longer than the
	// read's limit (Payload is then empty): such a row is dead, never
	// loaded into memory.
	PayloadBytes   int64
	Oversize       bool
	Headers        string
	Attempts       int
	MaxAttempts    int
	Partition      int
	UnknownOutcome bool
	CreatedAt      time.Time
	// Snapshot says the row was read from the snapshot domain
	// (SnapshotRead): once delivered, it is not written.
	Snapshot bool
}

// Outcome is how one delivery attempt ended.
type Outcome struct {
	ID int64
	// Status is StatusSent, StatusPending (retry) or StatusDead.
	Status string
	// Delay until the next attempt, for StatusPending.
	Delay time.Duration
	// Error is stored in last_error (ignored for StatusSent).
	Error string
	// CountAttempt adds one to attempts.
	CountAttempt bool
	// Unknown records that the attempt may have reached the destination.
	Unknown bool
	// Partition is the row's partition (Row.Partition). MySQL settles a
	// batch in partition order by it, so that the settle takes its lease
	// locks in the order renewals and takeovers do; a wrong one only
	// loses that order, never an outcome.
	Partition int
}

// Lease is a partition held by a relay.
type Lease struct {
	Partition int
	// InflightMaxID is the highest id a previous owner may have published
	// without settling (0 when unknown or clean).
	InflightMaxID int64
	// Taken is true when the partition was taken over from an owner whose
	// lease expired, rather than found free.
	Taken bool
	// Unclean is true when the previous owner, this relay's id included,
	// did not release the partition (it stopped, or its lease lapsed).
	Unclean bool
}

// Stats is a snapshot of the table.
type Stats struct {
	Pending, Sent, Consumed, Dead int64
	// Expired counts the messages whose expires_at came before they were
	// confirmed.
	Expired int64
	// OldestPendingAge is the age of the oldest pending message by
	// created_at, 0 if none.
	OldestPendingAge time.Duration
	// OldestDueAge is how long the pending message that fell due first
	// has been due (available_at reached), 0 if none is due.
	OldestDueAge time.Duration
	ByTopic      []TopicCount
}

// Route states in outbox_route_health.
const (
	RouteUp   = "up"
	RouteDown = "down"
)

// RouteHealth is one relay's view of one route.
type RouteHealth struct {
	Route, Relay string
	// State is RouteUp or RouteDown.
	State string
	// For is how long the route has been in State.
	For time.Duration
	// Reason is why it went down; "" when up.
	Reason string
}

// SummarizeRoutes folds the relays' views (as RouteHealth lists them)
// into one per route: down while any relay sees it down, since the
// earliest of them, with that relay's reason; else up, since the latest
// recovery. Relay is the relays in that state, comma-separated.
func SummarizeRoutes(views []RouteHealth) []RouteHealth {
	var out []RouteHealth
	for _, v := range views {
		i := len(out) - 1
		if i < 0 || out[i].Route != v.Route {
			out = append(out, v)
			continue
		}
		cur := &out[i]
		switch {
		case v.State == cur.State:
			cur.Relay += "," + v.Relay
			if (v.State == RouteDown && v.For > cur.For) || (v.State == RouteUp && v.For < cur.For) {
				cur.For, cur.Reason = v.For, v.Reason
			}
		case v.State == RouteDown:
			*cur = v
		}
	}
	return out
}

// TopicCount is the number of messages of a topic in a status.
type TopicCount struct {
	Topic  string
	Status string
	Count  int64
}

// Message is a full row, for operators.
type Message struct {
	ID          int64
	MessageID   string
	Topic       string
	Key         string
	Payload     string
	Headers     string
	Status      string
	Attempts    int
	MaxAttempts int
	AvailableAt time.Time
	CreatedAt   time.Time
	SentAt      *time.Time
	LastError   string
}

// Filter selects messages for operator commands. Empty fields match all.
type Filter struct {
	Status string
	Topic  string
	// Topics, when not nil, selects only messages whose topic is one of
	// them (none when it is empty), at most MaxTopics.
	Topics     []string
	MessageIDs []string
	Limit      int
}

// Store runs the outbox statements of one dialect over a database handle.
type Store struct {
	d  Dialect
	dl dialect
	// db is what the store's own statements run on: raw through the
	// dialect's pool (on MySQL it adds server-side time limits). raw is
	// the handle as New was given it.
	db  Querier
	raw Querier
	s   statements
	// ret are the retention statements over outbox_messages.
	ret retentionStatements
	// session opens a dedicated connection, for the statements that need
	// a transaction of their own (nil: they fail).
	session func(ctx context.Context) (Session, error)
	// maxPayload is the payload limit of the relay's reads (see
	// WithPayloadLimit); 0: none.
	maxPayload int64
	// snapshot: the database is read by snapshots (WithSnapshotRead).
	snapshot bool
}

// New returns a Store for dialect d over db, which must be a pool (the
// relay's statements run outside any caller transaction).
func New(d Dialect, db Querier) *Store {
	dl := dialectOf(d)
	return &Store{d: d, dl: dl, db: dl.pool(db), raw: db, s: dl.statements(), ret: dl.retention()}
}

// Dialect is the store's dialect.
func (st *Store) Dialect() Dialect { return st.d }

// DB is the handle the store was built over, as it was given.
func (st *Store) DB() Querier { return st.raw }

// Pool is the handle the store's own statements run on: DB through the
// dialect's pool (on MySQL, with a time limit on the server). Package
// adoptstore runs its statements over an adopted table on it too.
func (st *Store) Pool() Querier { return st.db }
