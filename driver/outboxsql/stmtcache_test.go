package outboxsql

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/txoutbox/outbox/driver"
)

// openSQLite opens a SQLite file in dir as the relay does (one
// connection), with a table t holding the one row v, and its driver.
func openSQLite(t *testing.T, path, journal, v string) (*sql.DB, *Driver) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode("+journal+")")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec("CREATE TABLE t (v TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t (v) VALUES (?)", v); err != nil {
		t.Fatal(err)
	}
	d, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, d
}

// values reads t through e.
func values(ctx context.Context, e driver.Executor) ([]string, error) {
	r, err := e.Query(ctx, "SELECT v FROM t ORDER BY v")
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []string
	for r.Next() {
		var v string
		if err := r.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, r.Err()
}

func wantValues(t *testing.T, e driver.Executor, want string) {
	t.Helper()
	got, err := values(t.Context(), e)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != want {
		t.Fatalf("read %v, want %s", got, want)
	}
}

// TestSQLitePreparedStatementsStayOnTheirDatabase: two databases run the
// same SQL text through their own prepared statements, and closing one
// leaves the other working.
func TestSQLitePreparedStatementsStayOnTheirDatabase(t *testing.T) {
	dir := t.TempDir()
	dbA, a := openSQLite(t, filepath.Join(dir, "a.db"), "wal", "a")
	_, b := openSQLite(t, filepath.Join(dir, "b.db"), "wal", "b")
	ea, eb := a.Executor(), b.Executor()
	for range 3 {
		wantValues(t, ea, "[a]")
		wantValues(t, eb, "[b]")
	}
	if _, err := eb.Exec(t.Context(), "INSERT INTO t (v) VALUES (?)", "b2"); err != nil {
		t.Fatal(err)
	}
	wantValues(t, ea, "[a]")
	wantValues(t, eb, "[b b2]")
	if a.stmts.len() != 1 || b.stmts.len() != 2 {
		t.Fatalf("prepared %d and %d statements, want 1 and 2", a.stmts.len(), b.stmts.len())
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dbA.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := values(t.Context(), ea); err == nil {
		t.Fatalf("the closed database answered %v", got)
	}
	wantValues(t, eb, "[b b2]")
	if a.stmts.len() != 0 {
		t.Fatalf("a closed driver keeps %d statements", a.stmts.len())
	}
}

// TestSQLitePreparedStatementsOnlyOnThePool: statements in transactions
// and sessions are never prepared, only the pool executor's.
func TestSQLitePreparedStatementsOnlyOnThePool(t *testing.T) {
	ctx := t.Context()
	_, d := openSQLite(t, filepath.Join(t.TempDir(), "a.db"), "wal", "a")
	ad := Adapt(d, func(tx *sql.Tx) Conn { return tx }, func(ctx context.Context, fn func(*sql.Tx) error) error {
		return d.InTx(ctx, fn)
	})
	if err := d.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := d.UnwrapExecutor(tx).Exec(ctx, "INSERT INTO t (v) VALUES (?)", "b"); err != nil {
			return err
		}
		wantValues(t, ad.UnwrapExecutor(tx), "[a b]")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s, err := d.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, s, "[a b]")
	if err := s.InTx(ctx, func(e driver.Executor) error {
		_, err := e.Exec(ctx, "INSERT INTO t (v) VALUES (?)", "c")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := d.stmts.len(); n != 0 {
		t.Fatalf("transactions and sessions prepared %d statements", n)
	}
	wantValues(t, d.Executor(), "[a b c]")
	wantValues(t, ad.Executor(), "[a b c]")
	if n := d.stmts.len(); n != 1 {
		t.Fatalf("the pool executor prepared %d statements, want 1", n)
	}
	// The prepared statement is there, and a transaction still runs the
	// same text unprepared on its own connection.
	if err := d.InTx(ctx, func(tx *sql.Tx) error {
		wantValues(t, d.UnwrapExecutor(tx), "[a b c]")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestSQLitePreparedStatementsHoldNoTransaction: between two runs a
// prepared read holds no lock and no snapshot: another connection's write
// commits at once (rollback journal, no busy timeout) and the next run
// sees it (WAL too).
func TestSQLitePreparedStatementsHoldNoTransaction(t *testing.T) {
	for _, journal := range []string{"delete", "wal"} {
		t.Run(journal, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.db")
			_, d := openSQLite(t, path, journal, "a")
			e := d.Executor()
			wantValues(t, e, "[a]")
			// Stopped half way: Close must end the statement's read.
			r, err := e.Query(t.Context(), "SELECT v FROM t ORDER BY v")
			if err != nil {
				t.Fatal(err)
			}
			if !r.Next() {
				t.Fatal(r.Err())
			}
			r.Close()

			other, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, err := other.Exec("INSERT INTO t (v) VALUES ('b')"); err != nil {
				t.Fatalf("a write beside the prepared read: %v", err)
			}
			wantValues(t, e, "[a b]")
			if _, err := e.Exec(t.Context(), "UPDATE t SET v = v || '!'"); err != nil {
				t.Fatal(err)
			}
			if _, err := other.Exec("INSERT INTO t (v) VALUES ('c')"); err != nil {
				t.Fatalf("a write after the prepared write: %v", err)
			}
			wantValues(t, e, "[a! b! c]")
			if n := d.stmts.len(); n != 2 {
				t.Fatalf("prepared %d statements, want 2", n)
			}
		})
	}
}

// TestSQLitePreparedStatementsEvicted: past stmtCacheSize texts the least
// recently used statement is closed, and every text still runs.
func TestSQLitePreparedStatementsEvicted(t *testing.T) {
	_, d := openSQLite(t, filepath.Join(t.TempDir(), "a.db"), "wal", "a")
	e := d.Executor()
	for i := range stmtCacheSize + 10 {
		var n int
		r, err := e.Query(t.Context(), fmt.Sprintf("SELECT count(*) + %d FROM t", i))
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			if err := r.Scan(&n); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
		if n != 1+i {
			t.Fatalf("statement %d read %d", i, n)
		}
		wantValues(t, e, "[a]") // the most used text stays prepared
	}
	if n := d.stmts.len(); n != stmtCacheSize {
		t.Fatalf("%d statements prepared, want %d", n, stmtCacheSize)
	}
	d.stmts.mu.Lock()
	_, kept := d.stmts.stmts["SELECT v FROM t ORDER BY v"]
	d.stmts.mu.Unlock()
	if !kept {
		t.Fatal("the most recently used statement was evicted")
	}
}
