package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestReadMarkReadsAndMarks: ReadMark returns what Read returns and leaves
// on each of the owner's leases the highest id it handed out from that
// partition (0 for one it gave nothing from), as MarkInflight would; a
// relay taking the partitions over after a crash finds those marks.
func TestReadMarkReadsAndMarks(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		var in []store.NewMessage
		for i := range 40 {
			in = append(in, newMsg("t.x", fmt.Sprintf("k%d", i%7)))
		}
		in = append(in, newMsg("t.nokey", ""))
		insert(t, db, st, in...)
		parts := acquireAll(t, st, "old")
		// Another relay's read marks nothing on these leases.
		if _, err := st.ReadMark(ctx, "other", parts, 1000); err != nil {
			t.Fatal(err)
		}
		want, err := st.Read(ctx, parts, 25)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.ReadMark(ctx, "old", parts, 25)
		if err != nil {
			t.Fatal(err)
		}
		ids := func(rows []store.Row) []int64 {
			var out []int64
			for _, r := range rows {
				out = append(out, r.ID)
			}
			return out
		}
		if len(got) != 25 || !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("ReadMark read %v, Read reads %v", ids(got), ids(want))
		}
		marks := store.MaxIDs(parts, got)
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_leases SET expires_at = ? WHERE owner = 'old'"), expired(db.Dialect))
		leases, err := st.Acquire(ctx, "new", parts, time.Minute)
		if err != nil || len(leases) != len(parts) {
			t.Fatal(err, leases)
		}
		marked := 0
		for i, l := range leases {
			if l.Partition != parts[i] || l.InflightMaxID != marks[i] {
				t.Fatalf("partition %d after takeover: mark %d, want %d", parts[i], l.InflightMaxID, marks[i])
			}
			if marks[i] > 0 {
				marked++
			}
		}
		if marked == 0 {
			t.Fatal("no partition was marked")
		}

		// The new owner's rounds move the marks on: to 0 where a read
		// gives nothing.
		if _, err := st.Settle(ctx, "new", sentAll(got)); err != nil {
			t.Fatal(err)
		}
		rest, err := st.ReadMark(ctx, "new", parts, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(rest) != len(in)-25 {
			t.Fatalf("second read: %d rows, want %d", len(rest), len(in)-25)
		}
		if _, err := st.Settle(ctx, "new", sentAll(rest)); err != nil {
			t.Fatal(err)
		}
		if rows, err := st.ReadMark(ctx, "new", parts, 1000); err != nil || len(rows) != 0 {
			t.Fatalf("read after everything was sent: %d rows, %v", len(rows), err)
		}
		// An empty read writes no mark: the last ones stay, covering only
		// rows already published. PostgreSQL's one statement never lowers
		// a mark, so it keeps the first round's where the second read
		// nothing; the two statements elsewhere mark 0 there.
		wantMarks := 0
		second := store.MaxIDs(parts, rest)
		for i := range parts {
			if second[i] > 0 || (db.Dialect == store.Postgres && marks[i] > 0) {
				wantMarks++
			}
		}
		if n := db.Count(t, "SELECT count(*) FROM outbox_leases WHERE inflight_max_id <> 0"); n != wantMarks {
			t.Fatalf("%d marks left after an empty read, want %d", n, wantMarks)
		}
		if db.Dialect == store.Postgres {
			for i, p := range parts {
				got := db.Count(t, "SELECT coalesce(max(inflight_max_id), 0) FROM outbox_leases WHERE partition_no = $1", p)
				if want := max(marks[i], second[i]); int64(got) != want {
					t.Fatalf("partition %d: mark %d, want %d (the highest id ever read from it)", p, got, want)
				}
			}
		}
	})
}

// TestReadMarkLargeBatch: a read with a limit above what one statement
// reads and marks on PostgreSQL returns what Read returns and leaves each
// partition it read from marked with the highest id read from it. A
// partition that gave nothing keeps its mark on PostgreSQL, as the one
// statement does; the two statements elsewhere mark it 0.
func TestReadMarkLargeBatch(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		var in []store.NewMessage
		for i := range 400 {
			in = append(in, newMsg("t.x", fmt.Sprintf("k%d", i%50)))
		}
		insert(t, db, st, in...)
		parts := acquireAll(t, st, "o")
		want, err := st.Read(ctx, parts, 1000)
		if err != nil || len(want) != len(in) {
			t.Fatalf("Read: %d rows, %v", len(want), err)
		}
		// A partition the read gives nothing from (50 keys leave most
		// of 64 partitions some), with a mark left by an earlier round.
		idle := -1
		if i := slices.Index(store.MaxIDs(parts, want), 0); i >= 0 {
			idle = parts[i]
			db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_leases SET inflight_max_id = 987654 WHERE partition_no = ?"), idle)
		} else if db.Dialect != store.SQLite {
			t.Fatal("every partition holds a row of the 50 keys")
		}
		got, err := st.ReadMark(ctx, "o", parts, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("ReadMark read %d rows, Read %d", len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID {
				t.Fatalf("row %d: ReadMark read id %d, Read %d", i, got[i].ID, want[i].ID)
			}
		}
		marks := store.MaxIDs(parts, got)
		for i, p := range parts {
			wantMark := marks[i]
			if p == idle && db.Dialect == store.Postgres {
				wantMark = 987654
			}
			have := db.Count(t, testdb.Placeholder(db.Dialect, "SELECT inflight_max_id FROM outbox_leases WHERE partition_no = ?"), p)
			if int64(have) != wantMark {
				t.Fatalf("partition %d: mark %d, want %d", p, have, wantMark)
			}
		}
	})
}

func sentAll(rows []store.Row) []store.Outcome {
	outs := make([]store.Outcome, len(rows))
	for i, r := range rows {
		outs[i] = store.Outcome{ID: r.ID, Status: store.StatusSent, CountAttempt: true}
	}
	return outs
}

// TestReadMarkCommitsAsync: on PostgreSQL the read that marks commits
// without waiting for the WAL flush, in its own transaction only.
func TestReadMarkCommitsAsync(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	ctx := context.Background()
	insert(t, db, db.Store(), newMsg("t.x", "k"))
	db.Exec(t, "UPDATE outbox_leases SET owner = 'r', expires_at = now() + interval '1 minute'")
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "SELECT id FROM outbox_read_mark($1::int[], 10, 'r')", allParts(t, db.Store()))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	if rows.Err() != nil || n != 1 {
		t.Fatalf("read %d rows, %v", n, rows.Err())
	}
	var v string
	if err := tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if v != "off" {
		t.Errorf("synchronous_commit in the read's transaction = %q, want off", v)
	}
	if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil || v != "on" {
		t.Errorf("synchronous_commit after the read's transaction = %q (%v), want on", v, err)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_leases WHERE inflight_max_id > 0"); n != 1 {
		t.Errorf("marks written: %d, want 1", n)
	}
}

// TestSettleReadMark: on PostgreSQL one call settles a round's outcomes,
// fenced by the owner's leases, then reads and marks the next batch, which
// sees what the settle wrote: a row settled sent is not read again, and a
// key whose head was just put back to wait gives nothing behind it.
// Elsewhere the store says it has no such call.
func TestSettleReadMark(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		insert(t, db, st, newMsg("t.x", "k"), newMsg("t.x", "k"), newMsg("t.x", "k"), newMsg("t.x", "k"))
		parts := acquireAll(t, st, "old")
		if st.SettlesWithRead() != (db.Dialect == store.Postgres) {
			t.Fatalf("SettlesWithRead on %s: %v", db.Dialect, st.SettlesWithRead())
		}
		if db.Dialect != store.Postgres {
			if _, _, err := st.SettleReadMark(ctx, "old", nil, parts, 10); !errors.Is(err, store.ErrNoSettleRead) {
				t.Fatalf("SettleReadMark on %s: %v, want ErrNoSettleRead", db.Dialect, err)
			}
			return
		}
		first, err := st.ReadMark(ctx, "old", parts, 2)
		if err != nil || len(first) != 2 {
			t.Fatal(err, len(first))
		}
		insert(t, db, st, newMsg("t.nokey", ""))
		outs := []store.Outcome{
			{ID: first[0].ID, Status: store.StatusSent, CountAttempt: true},
			{ID: first[1].ID, Status: store.StatusPending, Delay: time.Hour, Error: "retry later", CountAttempt: true},
		}
		// Another relay's call settles nothing; its read is a read.
		rows, settled, err := st.SettleReadMark(ctx, "other", outs, parts, 10)
		if err != nil || settled != 0 || len(rows) != 5 {
			t.Fatalf("another owner's call: %v, settled %d, read %d rows; want 0 settled, all 5", err, settled, len(rows))
		}
		rows, settled, err = st.SettleReadMark(ctx, "old", outs, parts, 10)
		if err != nil {
			t.Fatal(err)
		}
		if settled != 2 || len(rows) != 1 || rows[0].Topic != "t.nokey" || rows[0].HasKey {
			t.Fatalf("settled %d, read %+v; want 2 settled and only the keyless message (k waits behind its retried head)", settled, rows)
		}
		if got := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'"); got != 1 {
			t.Fatalf("%d rows sent, want 1", got)
		}
		leases, err := st.Held(ctx, "old")
		if err != nil {
			t.Fatal(err)
		}
		marked := false
		for _, l := range leases {
			if l.Partition == rows[0].Partition {
				marked = l.InflightMaxID == rows[0].ID
			}
		}
		if !marked {
			t.Fatalf("partition %d not marked with %d: %+v", rows[0].Partition, rows[0].ID, leases)
		}
		// Nothing to settle and nothing due: no rows, nothing settled.
		outs = []store.Outcome{{ID: rows[0].ID, Status: store.StatusSent, CountAttempt: true}}
		if rows, settled, err = st.SettleReadMark(ctx, "old", outs, parts, 10); err != nil || settled != 1 || len(rows) != 0 {
			t.Fatalf("last call: %v, settled %d, %d rows; want 1 settled, none read", err, settled, len(rows))
		}
	})
}
