// Package harness runs one test over every driver the outbox has: pgx and
// database/sql on PostgreSQL, database/sql on MariaDB and on SQLite. A
// Harness is a per-test database (see testdb) with the two things a test
// does through the public API on it: commit messages in the driver's own
// transactions, and build a relay. The root package's tests and the
// fault-injection suite (internal/testkit/chaos/scenario) share it.
package harness

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// Harness is one driver over its own migrated database.
type Harness struct {
	// Name is the driver case's name (Case.Name), for logs and results.
	Name string
	// DB is the test's database.
	DB *testdb.DB
	// NewRelay builds a relay over the driver with cfg.
	NewRelay func(cfg *outbox.RelayConfig) (*outbox.Relay, error)

	// enqueue is EnqueueHeld in the driver's own transactions.
	enqueue func(ctx context.Context, msgs []outbox.Message, hold time.Duration, rollback bool) ([]string, error)
}

// CommitError is a failed COMMIT: the transaction may have committed or
// not (the connection died during the COMMIT, say).
type CommitError struct{ Err error }

func (e *CommitError) Error() string { return "commit: " + e.Err.Error() }

// Unwrap returns the driver's error.
func (e *CommitError) Unwrap() error { return e.Err }

// Enqueue commits msgs in one transaction of the driver, through an
// outbox.Producer, and returns their ids; with rollback set it rolls the
// transaction back instead (the ids are still returned).
func (h *Harness) Enqueue(ctx context.Context, msgs []outbox.Message, rollback bool) ([]string, error) {
	return h.enqueue(ctx, msgs, 0, rollback)
}

// EnqueueHeld is Enqueue with the transaction held open for hold between
// the insert and the COMMIT, as a slow application transaction is. A
// failed COMMIT is a *CommitError; any other error means nothing was
// committed.
func (h *Harness) EnqueueHeld(ctx context.Context, msgs []outbox.Message, hold time.Duration, rollback bool) ([]string, error) {
	return h.enqueue(ctx, msgs, hold, rollback)
}

// Case names a driver and the database it runs on.
type Case struct {
	Name    string
	Dialect store.Dialect
	// PGX selects the pgx driver (PostgreSQL only); otherwise the
	// database/sql driver.
	PGX bool
	// Snapshot enables the snapshot read (PostgreSQL): the harness's
	// relays read by snapshots.
	Snapshot bool
}

// Cases are every driver on every database: what EachDriver runs.
var Cases = []Case{
	{Name: "pgx", Dialect: store.Postgres, PGX: true},
	{Name: "sql-postgres", Dialect: store.Postgres},
	{Name: "mysql", Dialect: store.MySQL},
	{Name: "sqlite", Dialect: store.SQLite},
}

// New opens a fresh database for c (testdb.New: a missing service fails
// the test under CI=true) and returns its harness.
func New(t *testing.T, c Case) *Harness {
	t.Helper()
	return Over(t, c, testdb.New(t, c.Dialect))
}

// Over is the harness of driver case c over db, a database the test
// opened itself (through a pooler, say).
func Over(t *testing.T, c Case, db *testdb.DB) *Harness {
	t.Helper()
	if c.Dialect == store.Postgres && (c.Snapshot || os.Getenv("OUTBOX_TEST_READ_PATH") == "snapshot") && !db.Snapshot {
		// OUTBOX_TEST_READ_PATH=snapshot runs every PostgreSQL case of
		// the scenarios with the snapshot read.
		db.EnableSnapshotRead(t)
	}
	h := &Harness{Name: c.Name, DB: db}
	if c.PGX {
		p, err := outbox.NewProducer(db.PGX, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.enqueue = func(ctx context.Context, msgs []outbox.Message, hold time.Duration, rollback bool) ([]string, error) {
			tx, err := db.Pool.Begin(ctx)
			if err != nil {
				return nil, err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			ids, err := p.EnqueueMany(ctx, tx, msgs)
			if err != nil || rollback {
				return ids, err
			}
			if hold > 0 {
				time.Sleep(hold)
			}
			if err := tx.Commit(ctx); err != nil {
				return ids, &CommitError{err}
			}
			return ids, nil
		}
		h.NewRelay = func(cfg *outbox.RelayConfig) (*outbox.Relay, error) {
			cfg.SnapshotRead = cfg.SnapshotRead || db.Snapshot
			return outbox.NewRelay(db.PGX, cfg)
		}
		return h
	}
	p, err := outbox.NewProducer(db.Std, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.enqueue = func(ctx context.Context, msgs []outbox.Message, hold time.Duration, rollback bool) ([]string, error) {
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		ids, err := p.EnqueueMany(ctx, tx, msgs)
		if err != nil || rollback {
			return ids, err
		}
		if hold > 0 {
			time.Sleep(hold)
		}
		if err := tx.Commit(); err != nil {
			return ids, &CommitError{err}
		}
		return ids, nil
	}
	h.NewRelay = func(cfg *outbox.RelayConfig) (*outbox.Relay, error) {
		cfg.SnapshotRead = cfg.SnapshotRead || db.Snapshot
		return outbox.NewRelay(db.Std, cfg)
	}
	return h
}

// EachDriver runs fn once per case of Cases, each in a parallel subtest
// named after the case with a harness of its own.
func EachDriver(t *testing.T, fn func(t *testing.T, h *Harness)) {
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, New(t, c))
		})
	}
}

// Config is relaytest.Config with routes instead of a catch-all route: a
// relay configuration quick enough for tests (2 s lease, polls at most
// 100 ms apart, retries from 50 ms to 200 ms, the test logger). Callers
// change the fields their test needs.
func Config(routes ...outbox.Route) *outbox.RelayConfig {
	cfg := relaytest.Config(nil)
	cfg.Routes = routes
	return cfg
}
