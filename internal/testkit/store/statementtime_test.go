package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMySQLServerStopsAbandonedStatements: a store statement on MariaDB
// that outlives its context fails with a timeout, and the server stops
// running it too, rather than going on with it after the driver has
// closed the connection: a read that walks a key's rows once per row (a
// keyed backlog held back behind a message delayed for an hour, with as
// many of the key's messages scheduled later still: some seconds of
// work), and a settle waiting for a row lock (it would
// wait for innodb_lock_wait_timeout, then write). Once the rows are free
// the same store reads and settles. With interpolateParams=false the
// driver prepares each statement on the server, the other way a
// statement reaches it.
func TestMySQLServerStopsAbandonedStatements(t *testing.T) {
	for _, interpolate := range []bool{true, false} {
		t.Run(fmt.Sprintf("interpolateParams=%v", interpolate), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, store.MySQL)
			st := db.Store()
			if !interpolate {
				other, err := dburl.Open(context.Background(), db.URL+"?interpolateParams=false")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(other.Close)
				st = other.Backend().Store
			}
			insert(t, db, st, slowReadBacklog(5000)...)
			parts := acquireAll(t, st, "relay")

			t.Run("slow read", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, err := st.Read(ctx, parts, 10)
				wantTimeout(t, err)
				waitNoStatements(t, db)
			})

			t.Run("settle behind a row lock", func(t *testing.T) {
				var id int64
				var part int
				if err := db.SQL.QueryRow("SELECT id, partition_no FROM outbox_messages ORDER BY id DESC LIMIT 1").Scan(&id, &part); err != nil {
					t.Fatal(err)
				}
				tx, err := db.SQL.BeginTx(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				if _, err := tx.Exec("SELECT id FROM outbox_messages WHERE id = ? FOR UPDATE", id); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, err = st.Settle(ctx, "relay", []store.Outcome{{ID: id, Status: store.StatusSent, Partition: part}})
				wantTimeout(t, err)
				waitNoStatements(t, db)
			})

			db.Exec(t, "UPDATE outbox_messages SET available_at = NOW(6) WHERE available_at > NOW(6)")
			rows, err := st.Read(context.Background(), parts, 10)
			if err != nil || len(rows) != 10 {
				t.Fatalf("read after the timeouts: %d rows, %v", len(rows), err)
			}
			outs := make([]store.Outcome, len(rows))
			for i, r := range rows {
				outs[i] = store.Outcome{ID: r.ID, Status: store.StatusSent, Partition: r.Partition}
			}
			if n, err := st.Settle(context.Background(), "relay", outs); err != nil || n != int64(len(outs)) {
				t.Fatalf("settle after the timeouts: %d rows, %v", n, err)
			}
			if c := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'"); c != len(outs) {
				t.Fatalf("%d rows sent, want %d: an abandoned settle went on", c, len(outs))
			}
		})
	}
}

// slowReadBacklog is n messages of one key held back behind a first one
// delayed for an hour, then n more of the key delayed for two: while the
// first waits, a read on MySQL probes the key's waiting rows for each of
// the n held back, walking the n scheduled after them each time.
func slowReadBacklog(n int) []store.NewMessage {
	msgs := make([]store.NewMessage, 2*n+1)
	for i := range msgs {
		msgs[i] = newMsg("t.slow", "held")
		if i > n {
			msgs[i].Delay = 2 * time.Hour
		}
	}
	msgs[0].Delay = time.Hour
	return msgs
}

// TestMySQLCallerStatementsRunAsGiven: the insert in a caller's
// transaction reaches the server as it is, with no time limit added,
// even when the caller's context has a deadline: the limit is for the
// store's own statements on its pool.
func TestMySQLCallerStatementsRunAsGiven(t *testing.T) {
	db := testdb.New(t, store.MySQL)
	st := db.Store()
	unlock := holdTableLock(t, db)
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	done := make(chan error, 1)
	go func() { done <- st.Insert(ctx, db.Std.UnwrapExecutor(tx), []store.NewMessage{newMsg("t.caller", "")}) }()
	var info string
	deadline := time.Now().Add(10 * time.Second)
	for info == "" {
		if time.Now().After(deadline) {
			t.Fatal("the insert never waited for the table lock")
		}
		for _, s := range runningStatements(t, db) {
			if strings.Contains(s, "INSERT INTO outbox_messages") {
				info = s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.HasPrefix(info, "INSERT INTO outbox_messages") || strings.Contains(info, "max_statement_time") || strings.Contains(info, "MAX_EXECUTION_TIME") {
		t.Errorf("the caller's insert reached the server as %.120q", info)
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("insert: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// holdTableLock write-locks outbox_messages from a connection of its own,
// which every other statement on the table waits for, until the returned
// function (which may be called twice) releases it.
func holdTableLock(t *testing.T, db *testdb.DB) (unlock func()) {
	t.Helper()
	c, err := db.SQL.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(context.Background(), "LOCK TABLES outbox_messages WRITE"); err != nil {
		_ = c.Close()
		t.Fatal(err)
	}
	conn := c
	return func() {
		if conn == nil {
			return
		}
		_, _ = conn.ExecContext(context.Background(), "UNLOCK TABLES")
		_ = conn.Close()
		conn = nil
	}
}

// wantTimeout fails the test unless err is a timeout, the client's or the
// server's.
func wantTimeout(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a timeout", err)
	}
}

// runningStatements are the statements the server runs in db's database
// for connections other than the asking one.
func runningStatements(t *testing.T, db *testdb.DB) []string {
	t.Helper()
	return db.Strings(t, `SELECT concat(INFO, ' [', coalesce(STATE, ''), ', ', TIME, ' s]') FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO IS NOT NULL`)
}

// waitNoStatements waits up to 5 s for the server to run no statement in
// db's database (but the asking one), failing the test with those it
// still runs.
func waitNoStatements(t *testing.T, db *testdb.DB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		running := runningStatements(t, db)
		if len(running) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still runs %d statements after the client gave up: %.300q", len(running), running)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMySQLCappedStatementsPrepare: every fixed statement of the store,
// with the time limit it is sent with, is one the server accepts, and
// the limit is where each server reads it: first (MariaDB's SET STATEMENT,
// in a comment MySQL skips), and after SELECT (MySQL's hint).
func TestMySQLCappedStatementsPrepare(t *testing.T) {
	db := testdb.New(t, store.MySQL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	capped := 0
	for name, sql := range store.MySQLStatements() {
		q := store.MySQLCap(ctx, sql)
		if q != sql {
			capped++
			if !strings.HasPrefix(q, "/*M! SET STATEMENT max_statement_time=4.") {
				t.Errorf("%s: sent as %.80q", name, q)
			}
			if strings.HasPrefix(sql, "SELECT") && !strings.Contains(q, " FOR */ SELECT /*+ MAX_EXECUTION_TIME(4") {
				t.Errorf("%s: a SELECT sent as %.120q", name, q)
			}
		}
		s, err := db.SQL.PrepareContext(ctx, q)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		_ = s.Close()
	}
	if capped < 20 {
		t.Errorf("%d statements sent with a limit", capped)
	}
	if q := store.MySQLCap(context.Background(), "SELECT 1"); q != "SELECT 1" {
		t.Errorf("a statement without a deadline was sent as %q", q)
	}
}
