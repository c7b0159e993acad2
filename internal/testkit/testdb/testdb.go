// Package testdb gives each test its own empty, migrated database on the
// real local services: a schema on PostgreSQL, a database on MariaDB, a
// file on SQLite. A service that cannot be reached fails the test when
// CI=true and skips it elsewhere, saying why.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/driver/outboxsql"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testenv"
)

// Service URLs, overridable by environment.
var (
	PostgresURL = Env("OUTBOX_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	MySQLURL    = Env("OUTBOX_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")
)

// Env is the environment variable k, or def when k is unset or empty
// (testenv.Env).
func Env(k, def string) string { return testenv.Env(k, def) }

// Unavailable fails the test in CI and skips it elsewhere
// (testenv.Unavailable).
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	testenv.Unavailable(t, what, err)
}

// Command finds the program a test runs (testenv.Command).
func Command(t testing.TB, name, env, install string) string {
	t.Helper()
	return testenv.Command(t, name, env, install)
}

// VerifyNoLeaks runs the package's tests (m) and fails the run if one
// leaves a goroutine behind. The goroutines of the database pools
// (pgxpool's health check, database/sql's connection opener), which live
// as long as a pool does, are not counted, nor those extra ignores.
func VerifyNoLeaks(m *testing.M, extra ...goleak.Option) {
	goleak.VerifyTestMain(m, append([]goleak.Option{
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
	}, extra...)...)
}

// RandomName is prefix and 12 random hex digits: a name of the test's
// own for a schema, a stream, a topic or a queue.
func RandomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// DB is a per-test database. Its embedded handles have SQL and Std set
// on every dialect: on PostgreSQL, pgx's database/sql adapter over Pool.
type DB struct {
	// URL opens this test's database in the CLI's --db form.
	URL string
	*dburl.DB
	// Snapshot: the snapshot read is enabled (EnableSnapshotRead).
	Snapshot bool
}

// EnableSnapshotRead enables the snapshot read on the database
// (PostgreSQL), whose relays must then read by snapshots.
func (d *DB) EnableSnapshotRead(t testing.TB) {
	t.Helper()
	if err := d.Store().EnableSnapshotRead(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.Snapshot = true
}

// Status is the status column as the relays see it: on a database read by
// snapshots, a delivered row of the snapshot domain (pending, behind its
// partition's recorded cursor) is sent.
func (d *DB) Status() string {
	if d.Snapshot {
		return store.SnapshotStatus
	}
	return "status"
}

// Store is the store over the database's pool.
func (d *DB) Store() *store.Store { return d.Backend().Store }

// Exec runs one statement, failing the test on error.
func (d *DB) Exec(t testing.TB, q string, args ...any) int64 {
	t.Helper()
	res, err := d.SQL.ExecContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", q, err)
	}
	n, _ := res.RowsAffected()
	return n
}

// Count runs a count query.
func (d *DB) Count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := d.SQL.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("count %q: %v", q, err)
	}
	return n
}

// Strings runs a query of one text column and returns its values in
// row order, failing the test on error.
func (d *DB) Strings(t testing.TB, q string, args ...any) []string {
	t.Helper()
	rows, err := d.SQL.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("scan %q: %v", q, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	return out
}

// Dialects lists the dialects the conformance tests run on.
var Dialects = []store.Dialect{store.Postgres, store.MySQL, store.SQLite}

// New opens a fresh, migrated database of dialect d.
func New(t testing.TB, d store.Dialect) *DB {
	t.Helper()
	db := Empty(t, d)
	Migrate(t, db)
	return db
}

// Empty opens a fresh database of dialect d without the outbox schema.
func Empty(t testing.TB, d store.Dialect) *DB {
	t.Helper()
	switch d {
	case store.Postgres:
		return postgres(t)
	case store.MySQL:
		return mysqlDB(t)
	default:
		return sqlite(t)
	}
}

func postgres(t testing.TB) *DB {
	schema := createOwn(t, "CREATE SCHEMA %s", "DROP SCHEMA %s CASCADE")
	return PostgresAt(t, withQuery(PostgresURL, "search_path", schema))
}

// createOwn creates an object with a random name on the PostgreSQL
// service (create and drop are statements with %s for the name), drops
// it at cleanup and returns its name.
func createOwn(t testing.TB, create, drop string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgxpool.New(ctx, PostgresURL)
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		Unavailable(t, "PostgreSQL at "+dburl.Redact(PostgresURL), err)
	}
	name := RandomName("t_")
	if _, err := admin.Exec(ctx, fmt.Sprintf(create, name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), fmt.Sprintf(drop, name))
		admin.Close()
	})
	return name
}

// PostgresAt opens the PostgreSQL database at u as a DB (pgx pool, pgx
// stdlib over it, both drivers), closed at cleanup; it creates nothing.
func PostgresAt(t testing.TB, u string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = sqlDB.Close(); pool.Close() })
	std, err := outboxsql.New(sqlDB, nil)
	if err != nil {
		t.Fatal(err)
	}
	pgxDrv, err := outboxpgx.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &DB{URL: u, DB: &dburl.DB{Dialect: store.Postgres, Pool: pool, SQL: sqlDB, Std: std, PGX: pgxDrv}}
}

// PostgresDatabase creates an empty database of the test's own on the
// PostgreSQL service, dropped at cleanup, and returns its name: for tests
// that reach it through a pooler, which refuses the search_path startup
// parameter of the per-test schemas.
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	return createOwn(t, "CREATE DATABASE %s", "DROP DATABASE %s WITH (FORCE)")
}

// WithDatabase is the PostgreSQL URL u with its database name replaced.
func WithDatabase(u, name string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Path = "/" + name
	return p.String()
}

// Migrate applies the outbox migrations to db.
func Migrate(t testing.TB, db *DB) {
	t.Helper()
	s, err := db.Backend().Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := store.Migrate(context.Background(), db.Dialect, s); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

func withQuery(raw, k, v string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

// MySQLAt opens the MariaDB/MySQL database at u (a private server's) as
// a DB, closed at cleanup; it creates nothing.
func MySQLAt(t testing.TB, u string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := dburl.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &DB{URL: u, DB: db}
}

func mysqlDB(t testing.TB) *DB {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := dburl.Open(ctx, MySQLURL)
	if err != nil {
		Unavailable(t, "MariaDB/MySQL at "+dburl.Redact(MySQLURL), err)
	}
	name := RandomName("t_")
	if _, err := admin.SQL.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.SQL.ExecContext(context.Background(), "DROP DATABASE "+name)
		admin.Close()
	})
	u, _ := url.Parse(MySQLURL)
	u.Path = "/" + name
	return MySQLAt(t, u.String())
}

func sqlite(t testing.TB) *DB {
	path := filepath.Join(t.TempDir(), "outbox.db")
	u := "sqlite://" + path
	db, err := dburl.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &DB{URL: u, DB: db}
}

// Placeholder rewrites "?" placeholders for d (PostgreSQL wants $n).
func Placeholder(d store.Dialect, q string) string { return store.Bind(d, q) }

// Ago is SQL for the database's time d ago (d < 0: in the future), in
// the representation of dialect d's timestamp columns.
func Ago(d store.Dialect, ago time.Duration) string {
	s, sign := int64(ago/time.Second), "-"
	if s < 0 {
		s, sign = -s, "+"
	}
	switch d {
	case store.Postgres:
		return fmt.Sprintf("now() %s interval '%d seconds'", sign, s)
	case store.MySQL:
		return fmt.Sprintf("NOW(6) %s INTERVAL %d SECOND", sign, s)
	default:
		return fmt.Sprintf("strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '%s%d seconds')", sign, s)
	}
}

// Statuses is message id → status for every row of the database's
// outbox, failing the test on error.
func (d *DB) Statuses(t testing.TB) map[string]string {
	t.Helper()
	q := "SELECT message_id, status FROM outbox_messages"
	if d.Dialect == store.Postgres {
		q = "SELECT message_id::text, " + d.Status() + " FROM outbox_messages"
	}
	rows, err := d.SQL.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
