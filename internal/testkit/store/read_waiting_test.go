package store_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// fillBehindHead commits, in id order: rows of other keys and keyless
// rows, ahead due rows of key "K", K's head waiting out a backoff (due in
// an hour), n due rows of K behind it, then more rows of other keys. It
// returns the message ids a read may hand out, in id order: all but K's
// head and the rows behind it.
func fillBehindHead(t testing.TB, db *testdb.DB, st *store.Store, ahead, n int) []string {
	t.Helper()
	var want []string
	add := func(m store.NewMessage, readable bool) store.NewMessage {
		if readable {
			want = append(want, m.MessageID)
		}
		return m
	}
	var before []store.NewMessage
	for i := range 10 {
		before = append(before, add(newMsg("t.head", fmt.Sprintf("other-%d", i)), true))
		before = append(before, add(newMsg("t.head", ""), true))
	}
	insert(t, db, st, before...)
	keyRows(t, db, st, ahead, func(m store.NewMessage) store.NewMessage { return add(m, true) })
	head := newMsg("t.head", "K")
	head.Delay = time.Hour
	insert(t, db, st, add(head, false))
	keyRows(t, db, st, n, func(m store.NewMessage) store.NewMessage { return add(m, false) })
	var after []store.NewMessage
	for i := range 10 {
		after = append(after, add(newMsg("t.head", fmt.Sprintf("other-%d", 10+i)), true))
	}
	insert(t, db, st, after...)
	return want
}

// keyRows commits n due rows of key "K", 1,000 per transaction, each
// passed through add.
func keyRows(t testing.TB, db *testdb.DB, st *store.Store, n int, add func(store.NewMessage) store.NewMessage) {
	t.Helper()
	for done := 0; done < n; {
		var batch []store.NewMessage
		for ; len(batch) < 1000 && done < n; done++ {
			batch = append(batch, add(newMsg("t.head", "K")))
		}
		insert(t, db, st, batch...)
	}
}

// readIDs reads every partition with a limit above what is pending and
// returns the message ids read, in the order read.
func readIDs(t testing.TB, st *store.Store, limit int) []string {
	t.Helper()
	rows, err := st.Read(context.Background(), allParts(t, st), limit)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.MessageID
	}
	return ids
}

// TestReadBehindWaitingHead: the rows of a key behind its head, which
// waits out a backoff, are not read; the key's rows before the head and
// every other key's rows are, in id order.
func TestReadBehindWaitingHead(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		want := fillBehindHead(t, db, st, 5, 50)
		if got := readIDs(t, st, 1000); !slices.Equal(got, want) {
			t.Fatalf("read %d rows %v, want %d rows %v", len(got), got, len(want), want)
		}
	})
}

// TestMySQLReadBehindWaitingHeadWork: on MariaDB, a read over a key with
// thousands of due rows before and behind its waiting head reads a number
// of index entries that grows with the rows, not with their square. The
// handler counters of the read's own session count the entries each probe
// of the waiting-rows index walks (those index condition pushdown skips
// included); probes that walked the key's every due row would read some
// 4n² = 16,000,000 of them here.
func TestMySQLReadBehindWaitingHeadWork(t *testing.T) {
	t.Parallel()
	const n = 2000
	db, st := oneSessionMySQL(t)
	want := fillBehindHead(t, db, st, n, n)
	db.Exec(t, "ANALYZE TABLE outbox_messages")

	conn := db.Strings(t, "SELECT CONNECTION_ID()")
	before := handlerReads(t, db)
	start := time.Now()
	got := readIDs(t, st, 10*n)
	elapsed := time.Since(start)
	work := handlerReads(t, db) - before
	if again := db.Strings(t, "SELECT CONNECTION_ID()"); !slices.Equal(again, conn) {
		t.Fatalf("the read's counters came from connection %v, then %v", conn, again)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	t.Logf("read %d rows past %d rows held back: %d index and row reads, %v", len(got), n+1, work, elapsed)
	if limit := int64(50 * n); work > limit {
		t.Fatalf("the read made %d index and row reads for %d rows held back, over %d: the probes walk the key's due rows", work, n, limit)
	}
}

// oneSessionMySQL is a MariaDB test database on one connection, so that
// the session's status counters are those of the statements the test runs.
func oneSessionMySQL(t *testing.T) (*testdb.DB, *store.Store) {
	t.Helper()
	db := testdb.New(t, store.MySQL)
	db.SQL.SetMaxOpenConns(1)
	return db, store.NewBackend(db.Std).Store
}

// handlerReads is the sum of the session's counters of index entries and
// rows read.
func handlerReads(t testing.TB, db *testdb.DB) int64 {
	t.Helper()
	rows, err := db.SQL.QueryContext(context.Background(),
		"SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%' OR Variable_name = 'Handler_icp_attempts'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			t.Fatalf("%s = %q: %v", name, value, err)
		}
		sum += v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}
