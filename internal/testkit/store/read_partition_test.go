package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMySQLReadTestsPartitionsInTheIndex: on MariaDB, a read of a quarter
// of the partitions (one of four workers) returns exactly those
// partitions' rows, in id order, and tests each pending row's partition
// on its entry in the pending-rows index (schema version 15): index
// condition pushdown tries every entry walked and passes only the
// quarter, so the other rows are never looked up. Without the partition
// in the index every entry passed and every row was looked up.
func TestMySQLReadTestsPartitionsInTheIndex(t *testing.T) {
	t.Parallel()
	const n = 2000
	db, st := oneSessionMySQL(t)
	var msgs []store.NewMessage
	for range n {
		msgs = append(msgs, newMsg("t.parts", ""))
	}
	insert(t, db, st, msgs...)
	db.Exec(t, "ANALYZE TABLE outbox_messages")

	ctx := context.Background()
	all, err := st.Read(ctx, allParts(t, st), 2*n)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(all) != n {
		t.Fatalf("a read of every partition gave %d rows, want %d", len(all), n)
	}
	var parts []int
	for p := range 64 {
		if p%4 == 1 {
			parts = append(parts, p)
		}
	}
	var want []string
	for _, r := range all {
		if slices.Contains(parts, r.Partition) {
			want = append(want, r.MessageID)
		}
	}

	before := icpCounters(t, db)
	rows, err := st.Read(ctx, parts, 2*n)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	after := icpCounters(t, db)
	got := make([]string, len(rows))
	for i, r := range rows {
		got[i] = r.MessageID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("a read of partitions %v gave %d rows, want their %d, in id order", parts, len(got), len(want))
	}
	attempts, matched := after[0]-before[0], after[1]-before[1]
	t.Logf("read %d of %d rows: the pushed-down condition tried %d index entries, passed %d", len(got), n, attempts, matched)
	if attempts < n {
		t.Fatalf("the pushed-down condition tried %d index entries of the %d pending rows walked: the partition is not tested on the index entry", attempts, n)
	}
	if matched > attempts/2 {
		t.Fatalf("the pushed-down condition passed %d of %d index entries for a quarter of the partitions", matched, attempts)
	}
}

// icpCounters is the session's Handler_icp_attempts and Handler_icp_match.
func icpCounters(t testing.TB, db *testdb.DB) [2]int64 {
	t.Helper()
	var c [2]int64
	for i, name := range []string{"Handler_icp_attempts", "Handler_icp_match"} {
		var v string
		if err := db.SQL.QueryRowContext(context.Background(), "SHOW SESSION STATUS LIKE '"+name+"'").Scan(new(string), &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := fmt.Sscan(v, &c[i]); err != nil {
			t.Fatalf("%s = %q: %v", name, v, err)
		}
	}
	return c
}
