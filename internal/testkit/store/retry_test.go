package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestSettleRetriesDeadlockVictim: on MariaDB, a settle caught in a
// deadlock with an operator's transaction, and chosen as its victim (the
// smaller transaction), is run again by the store and records its
// outcomes once the other transaction ends.
func TestSettleRetriesDeadlockVictim(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.MySQL)
	st := store.NewBackend(db.Std).Store
	ctx := context.Background()
	var in []store.NewMessage
	for i := 0; i < 202; i++ {
		in = append(in, newMsg("t.deadlock", fmt.Sprintf("k%d", i)))
	}
	insert(t, db, st, in...)
	parts := acquireAll(t, st, "r1")
	rows, err := st.Read(ctx, parts, len(in))
	if err != nil || len(rows) != len(in) {
		t.Fatalf("read %d rows: %v", len(rows), err)
	}
	first, second := rows[0].ID, rows[1].ID
	deadlocks := innodbDeadlocks(t, db)

	// The other transaction is large (it changed 200 rows), so InnoDB
	// chooses the settle as the victim; it holds the second row.
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "UPDATE outbox_messages SET last_error = 'operator' WHERE id > ?", second); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE outbox_messages SET last_error = 'operator' WHERE id = ?", second); err != nil {
		t.Fatal(err)
	}

	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Locks the first row, then waits for the second.
		n, err := st.Settle(ctx, "r1", []store.Outcome{{ID: first, Status: store.StatusSent}, {ID: second, Status: store.StatusSent}})
		done <- result{n, err}
	}()
	waitForLockWait(t, db)
	// Closes the cycle: the settle is rolled back, this update goes on.
	if _, err := tx.ExecContext(ctx, "UPDATE outbox_messages SET last_error = 'operator' WHERE id = ?", first); err != nil {
		t.Fatalf("the operator's transaction was chosen as the victim: %v", err)
	}
	select {
	case r := <-done:
		t.Fatalf("settle ended while the operator's transaction held its rows: %d, %v", r.n, r.err)
	default:
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.n != 2 {
		t.Fatalf("settle after the deadlock: %d rows, %v (want 2, nil)", r.n, r.err)
	}
	if c := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'"); c != 2 {
		t.Fatalf("%d rows sent, want 2", c)
	}
	if innodbDeadlocks(t, db) == deadlocks {
		t.Fatal("no deadlock happened: the settle took its locks in another order")
	}
}

// innodbDeadlocks is the server's count of deadlocks so far.
func innodbDeadlocks(t *testing.T, db *testdb.DB) int {
	t.Helper()
	var name string
	var n int
	if err := db.SQL.QueryRowContext(context.Background(), "SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitForLockWait returns once a settle on db waits for a row lock.
func waitForLockWait(t *testing.T, db *testdb.DB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for db.Count(t, `SELECT count(*) FROM information_schema.innodb_trx AS x JOIN information_schema.processlist AS p ON p.id = x.trx_mysql_thread_id
WHERE x.trx_state = 'LOCK WAIT' AND p.db = DATABASE() AND x.trx_query LIKE 'UPDATE JSON_TABLE%'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the settle never waited for the operator's row lock")
		}
		// InnoDB refreshes its information_schema transaction tables
		// only when they have not been read for 100 ms: polling faster
		// would read the same stale snapshot forever.
		time.Sleep(200 * time.Millisecond)
	}
}
