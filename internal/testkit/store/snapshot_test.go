package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// snapshotDB is a fresh PostgreSQL database with the snapshot read path
// enabled (twice: the step is idempotent) and every partition leased to
// owner.
func snapshotDB(t *testing.T, owner string) (*testdb.DB, *store.Store, []int) {
	t.Helper()
	db := testdb.New(t, store.Postgres)
	st := db.Store()
	ctx := context.Background()
	if on, err := st.SnapshotReadEnabled(ctx); err != nil || on {
		t.Fatalf("enabled before the step: %v %v", on, err)
	}
	for range 2 {
		if err := st.EnableSnapshotRead(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if on, err := st.SnapshotReadEnabled(ctx); err != nil || !on {
		t.Fatalf("not enabled after the step: %v %v", on, err)
	}
	return db, st, acquireAll(t, st, owner)
}

// cursorsOf starts a cursor for each of parts from the leases (as a
// relay does when it takes them).
func cursorsOf(t *testing.T, st *store.Store, owner string, parts []int, spill bool) []store.SnapshotCursor {
	t.Helper()
	cs, _, err := st.SnapshotResume(context.Background(), owner, parts, slices.Repeat([]bool{spill}, len(parts)), 1000)
	if err != nil || len(cs) != len(parts) {
		t.Fatalf("resume: %d cursors of %d: %v", len(cs), len(parts), err)
	}
	return cs
}

// pageAll pages the snapshot domain limit rows at a time until a page
// comes back short, and returns the ids delivered and the cursors after.
func pageAll(t *testing.T, st *store.Store, cs []store.SnapshotCursor, limit int) ([]int64, []store.SnapshotCursor) {
	t.Helper()
	var ids []int64
	for {
		page, err := st.SnapshotRead(context.Background(), "", cs, nil, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rows {
			if !r.Snapshot || r.Payload == "" || r.MessageID == "" {
				t.Fatalf("row %+v not a whole snapshot row", r)
			}
			ids = append(ids, r.ID)
		}
		cs = page.Cursors
		if page.Read < limit {
			return ids, cs
		}
	}
}

// TestSnapshotReadEachCommittedRowOnce: pages of any size read every row
// committed after the cursor exactly once, in transaction order, without
// writing any; a row whose transaction commits after a later one's is
// read in the next batch, not skipped; rows written before the step are
// left to the table domain.
func TestSnapshotReadEachCommittedRowOnce(t *testing.T) {
	db, st, parts := snapshotDB(t, "r1")
	ctx := context.Background()
	// A row as the step leaves those written before it: in the table
	// domain, which the snapshot read leaves alone.
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload) VALUES ('t.old', '{}')`)
	db.Exec(t, `UPDATE outbox_messages SET outbox_txid = NULL`)
	cs := cursorsOf(t, st, "r1", parts, false)
	for i := range 57 {
		insert(t, db, st, newMsg("t.x", fmt.Sprintf("k%d", i%9)))
	}
	// A transaction open across the read: its row has a lower id than
	// the next one, and commits after it.
	late, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Rollback() }()
	if _, err := late.ExecContext(ctx, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('t.late', 'late', '{}')`); err != nil {
		t.Fatal(err)
	}
	insert(t, db, st, newMsg("t.x", "after-late"))
	got, cs := pageAll(t, st, cs, 7)
	lateID := idsWhere(t, db, "topic = 't.late'")
	if len(lateID) != 0 {
		t.Fatal("an uncommitted row is visible")
	}
	want := idsWhere(t, db, "topic <> 't.old'")
	if !slices.Equal(sorted(got), want) {
		t.Fatalf("first batch read %v, want %v", got, want)
	}
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	lateID = idsWhere(t, db, "topic = 't.late'")
	again, cs := pageAll(t, st, cs, 7)
	if !slices.Equal(again, lateID) || lateID[0] > want[len(want)-1] {
		t.Fatalf("after the late commit the read gave %v, want the late row %v (ids up to %d before)", again, lateID, want[len(want)-1])
	}
	if more, _ := pageAll(t, st, cs, 7); len(more) != 0 {
		t.Fatalf("read %v again", more)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE topic <> 't.old' AND (status <> 'pending' OR outbox_txid IS NULL OR attempts <> 0)`); n != 0 {
		t.Fatalf("%d rows written by the reads", n)
	}
	// The table domain holds only the row from before the step.
	if rows, err := st.ReadRetries(ctx, "r1", parts, 100); err != nil || len(rows) != 1 || rows[0].Topic != "t.old" {
		t.Fatalf("table domain read %+v: %v", rows, err)
	}
}

// TestSnapshotReadHoldsBack: rows that cannot go now (a delayed one, an
// expired one, a later row of a key whose earlier row waits in the table
// domain) move to the table domain instead of being delivered, and are
// found there in key order; a settled retry moves there too.
func TestSnapshotReadHoldsBack(t *testing.T) {
	db, st, parts := snapshotDB(t, "r1")
	ctx := context.Background()
	cs := cursorsOf(t, st, "r1", parts, false)
	insert(t, db, st, newMsg("t.first", "k"))
	first := idsWhere(t, db, "topic = 't.first'")[0]
	page, err := st.SnapshotRead(ctx, "r1", cs, []int{cs[0].Partition}, 100)
	if err != nil || len(page.Rows) != 1 || page.Rows[0].ID != first {
		t.Fatalf("read %+v: %v", page.Rows, err)
	}
	cs = page.Cursors
	// The first row fails: it waits in the table domain.
	if n, err := st.SettleSnapshot(ctx, "r1", []store.Outcome{{ID: first, Status: store.StatusPending, Delay: time.Hour, Error: "down", CountAttempt: true}}); err != nil || n != 1 {
		t.Fatalf("settle: %d %v", n, err)
	}
	delayed := newMsg("t.delayed", "")
	delayed.Delay = time.Hour
	insert(t, db, st, newMsg("t.second", "k"), delayed, newMsg("t.free", "other"))
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, expires_at) VALUES ('t.expired', '{}', now() - interval '1 second')`)
	page, err = st.SnapshotRead(ctx, "r1", cs, []int{cs[0].Partition}, 100)
	if err != nil {
		t.Fatal(err)
	}
	// The read recorded the cursor it was given for the partition kept.
	if got := db.Strings(t, `SELECT snap_lo::text FROM outbox_leases WHERE partition_no = $1`, cs[0].Partition); len(got) != 1 || got[0] != cs[0].Lo {
		t.Fatalf("recorded cursor %v, want %s", got, cs[0].Lo)
	}
	if page.Read != 4 || len(page.Rows) != 1 || page.Rows[0].Topic != "t.free" {
		t.Fatalf("read %d rows, delivering %+v; want 4 read and only t.free delivered", page.Read, page.Rows)
	}
	if got := db.Strings(t, `SELECT topic FROM outbox_messages WHERE outbox_txid IS NULL AND status = 'pending' ORDER BY id`); !slices.Equal(got, []string{"t.first", "t.second", "t.delayed", "t.expired"}) {
		t.Fatalf("table domain %v", got)
	}
	// t.second waits for t.first, t.delayed for its time; the expiry
	// takes t.expired.
	if n, err := st.ExpireTable(ctx, "r1"); err != nil || n != 1 {
		t.Fatalf("expired %d: %v", n, err)
	}
	if rows, err := st.ReadRetries(ctx, "r1", parts, 100); err != nil || len(rows) != 0 {
		t.Fatalf("table domain read %+v while its rows wait: %v", rows, err)
	}
	db.Exec(t, `UPDATE outbox_messages SET available_at = now() WHERE topic = 't.first'`)
	rows, err := st.ReadRetries(ctx, "r1", parts, 100)
	if err != nil || len(rows) != 2 || rows[0].ID != first || rows[1].Topic != "t.second" || rows[0].Snapshot {
		t.Fatalf("table domain read %+v: %v", rows, err)
	}
	// The table domain's rows are written when sent.
	if n, err := st.SettleSnapshot(ctx, "r1", []store.Outcome{{ID: rows[0].ID, Status: store.StatusSent, CountAttempt: true}, {ID: rows[1].ID, Status: store.StatusSent, CountAttempt: true}}); err != nil || n != 2 {
		t.Fatalf("settle: %d %v", n, err)
	}
	if got := db.Strings(t, `SELECT topic || ' ' || status FROM outbox_messages ORDER BY id`); !slices.Equal(got, []string{"t.first sent", "t.second sent", "t.delayed pending", "t.free pending", "t.expired expired"}) {
		t.Fatalf("rows %v", got)
	}
	// A delivered row an operator moves out of pending and back (by any
	// statement) is read again, from the table domain.
	db.Exec(t, `UPDATE outbox_messages SET status = 'dead' WHERE topic = 't.free'`)
	db.Exec(t, `UPDATE outbox_messages SET status = 'pending', available_at = now() WHERE topic = 't.free'`)
	if rows, err := st.ReadRetries(ctx, "r1", parts, 100); err != nil || len(rows) != 1 || rows[0].Topic != "t.free" {
		t.Fatalf("table domain read %+v after a requeue: %v", rows, err)
	}
}

// TestSnapshotCursorHandover: a relay that hands its partitions over
// leaves its cursor, and the next owner reads on from it; one that stops
// without handing over leaves the rows after its recorded cursor to the
// table domain as suspects of the next owner, which reads new rows from
// the snapshot it took over at.
func TestSnapshotCursorHandover(t *testing.T) {
	db, st, parts := snapshotDB(t, "r1")
	ctx := context.Background()
	cs := cursorsOf(t, st, "r1", parts, false)
	for i := range 10 {
		insert(t, db, st, newMsg("t.a", fmt.Sprint(i)))
	}
	got, cs := pageAll(t, st, cs, 4)
	if len(got) != 10 {
		t.Fatalf("read %d of 10", len(got))
	}
	if err := st.SaveSnapshotCursors(ctx, "r1", cs); err != nil {
		t.Fatal(err)
	}
	// Another owner's cursors are not written.
	if err := st.SaveSnapshotCursors(ctx, "r2", []store.SnapshotCursor{{Partition: parts[0]}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		insert(t, db, st, newMsg("t.b", fmt.Sprint(i)))
	}
	if err := st.Release(ctx, "r1", parts); err != nil {
		t.Fatal(err)
	}
	acquireAll(t, st, "r2")
	cs = cursorsOf(t, st, "r2", parts, false)
	got, cs = pageAll(t, st, cs, 4)
	if want := idsWhere(t, db, "topic = 't.b'"); !slices.Equal(sorted(got), want) {
		t.Fatalf("after a handover read %v, want %v", got, want)
	}
	// r2 reads the next rows, records its cursor, reads more and stops
	// without handing over: r3 finds the rows after the recorded cursor
	// in the table domain, marked in flight.
	if err := st.SaveSnapshotCursors(ctx, "r2", cs); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		insert(t, db, st, newMsg("t.c", fmt.Sprint(i)))
	}
	if got, _ = pageAll(t, st, cs, 100); len(got) != 5 {
		t.Fatalf("read %d of 5", len(got))
	}
	db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_leases SET expires_at = ? WHERE owner = 'r2'"), expired(db.Dialect))
	leases, err := st.Acquire(ctx, "r3", parts, time.Minute)
	if err != nil || len(leases) != len(parts) {
		t.Fatal(err)
	}
	spill := make([]bool, len(parts))
	for i, l := range leases {
		spill[i] = l.Taken
	}
	if !slices.Contains(spill, true) {
		t.Fatal("no lease taken from r2")
	}
	cs, marks, err := st.SnapshotResume(ctx, "r3", parts, spill, 1000)
	if err != nil || len(cs) != len(parts) {
		t.Fatal(err)
	}
	suspects := idsWhere(t, db, "topic = 't.c'")
	if got := idsWhere(t, db, "outbox_txid IS NULL AND status = 'pending'"); !slices.Equal(got, suspects) {
		t.Fatalf("table domain %v after the takeover, want r2's unrecorded rows %v", got, suspects)
	}
	if slices.Max(marks) != suspects[len(suspects)-1] {
		t.Fatalf("in-flight marks %v, want up to %d", marks, suspects[len(suspects)-1])
	}
	insert(t, db, st, newMsg("t.d", "x"))
	if got, _ = pageAll(t, st, cs, 100); !slices.Equal(got, idsWhere(t, db, "topic = 't.d'")) {
		t.Fatalf("r3 read %v, want only the new row", got)
	}
	rows, err := st.ReadRetries(ctx, "r3", parts, 100)
	if err != nil || len(rows) != len(suspects) {
		t.Fatalf("table domain read %d rows, want %d: %v", len(rows), len(suspects), err)
	}
}

// TestSnapshotReadNeedsPostgres: the other dialects say so.
func TestSnapshotReadNeedsPostgres(t *testing.T) {
	for _, d := range []store.Dialect{store.MySQL, store.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			st := testdb.New(t, d).Store()
			if err := st.EnableSnapshotRead(context.Background()); !errors.Is(err, store.ErrSnapshotDialect) {
				t.Fatalf("enable on %s: %v", d, err)
			}
			if on, err := st.SnapshotReadEnabled(context.Background()); on || err != nil {
				t.Fatalf("enabled on %s: %v %v", d, on, err)
			}
		})
	}
}

// idsWhere returns the ids of the rows where cond holds, in order.
func idsWhere(t *testing.T, db *testdb.DB, cond string) []int64 {
	t.Helper()
	var out []int64
	for _, s := range db.Strings(t, "SELECT id::text FROM outbox_messages WHERE "+cond) {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return sorted(out)
}

func sorted(ids []int64) []int64 { return slices.Sorted(slices.Values(ids)) }

// TestSnapshotDeliveredCountsAsSent: with the cursors recorded, a
// delivered row of the snapshot domain counts as sent in the status
// counts and the gauges, the oldest pending age is the oldest row not
// delivered, and retention removes delivered rows past the sent
// retention (archived as sent), never one not yet delivered.
func TestSnapshotDeliveredCountsAsSent(t *testing.T) {
	db, st, parts := snapshotDB(t, "r1")
	ctx := context.Background()
	snap := st.WithSnapshotRead()
	cs := cursorsOf(t, st, "r1", parts, false)
	for i := range 4 {
		insert(t, db, st, newMsg("t.old", fmt.Sprint(i)))
	}
	db.Exec(t, `UPDATE outbox_messages SET created_at = now() - interval '2 hours', available_at = now() - interval '2 hours'`)
	got, cs := pageAll(t, st, cs, 100)
	if len(got) != 4 {
		t.Fatalf("read %d of 4", len(got))
	}
	if err := st.SaveSnapshotCursors(ctx, "r1", cs); err != nil {
		t.Fatal(err)
	}
	insert(t, db, st, newMsg("t.new", "a"), newMsg("t.new", "b"))
	db.Exec(t, `UPDATE outbox_messages SET created_at = now() - interval '10 minutes', available_at = now() - interval '10 minutes' WHERE topic = 't.new'`)
	stats, err := snap.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Sent != 4 || stats.Pending != 2 {
		t.Fatalf("stats sent %d pending %d, want 4 and 2", stats.Sent, stats.Pending)
	}
	if stats.OldestPendingAge < 9*time.Minute || stats.OldestPendingAge > 11*time.Minute {
		t.Fatalf("oldest pending %s, want the new rows' 10m", stats.OldestPendingAge)
	}
	g, err := snap.Gauges(ctx)
	if err != nil || g.Pending != 2 {
		t.Fatalf("gauges pending %d: %v", g.Pending, err)
	}
	if plain, _ := st.Stats(ctx); plain.Pending != 6 {
		t.Fatalf("the table read's counts see %d pending, want all 6", plain.Pending)
	}
	b, err := snap.Retain(ctx, 0, 100, store.RetentionPolicy{Sent: time.Hour, Dead: time.Hour, Archive: true})
	if err != nil || b.Removed != 4 {
		t.Fatalf("retention removed %d: %v", b.Removed, err)
	}
	if got := db.Strings(t, `SELECT topic || ' ' || status FROM outbox_messages_archive ORDER BY id`); len(got) != 4 || got[0] != "t.old sent" {
		t.Fatalf("archived %v", got)
	}
	if got := db.Strings(t, `SELECT topic FROM outbox_messages`); len(got) != 2 || got[0] != "t.new" {
		t.Fatalf("left %v", got)
	}
}

// TestDisableSnapshotRead: turning the snapshot read off is refused while
// a relay holds leases; with none held, it marks the rows the recorded
// cursors passed sent, leaves the others pending, and drops what the step
// added, so that the table read delivers those (and new rows) again.
func TestDisableSnapshotRead(t *testing.T) {
	db, st, parts := snapshotDB(t, "r1")
	ctx := context.Background()
	cs := cursorsOf(t, st, "r1", parts, false)
	for i := range 7 {
		insert(t, db, st, newMsg("t.a", fmt.Sprint(i)))
	}
	got, cs := pageAll(t, st, cs, 3)
	if len(got) != 7 {
		t.Fatalf("read %d of 7", len(got))
	}
	if err := st.SaveSnapshotCursors(ctx, "r1", cs); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		insert(t, db, st, newMsg("t.b", fmt.Sprint(i)))
	}
	if _, err := st.DisableSnapshotRead(ctx); err == nil || !strings.Contains(err.Error(), "r1") {
		t.Fatalf("turned off with r1 holding leases: %v", err)
	}
	if on, err := st.SnapshotReadEnabled(ctx); err != nil || !on {
		t.Fatalf("a refused turn-off changed the schema: %v %v", on, err)
	}
	if err := st.Release(ctx, "r1", parts); err != nil {
		t.Fatal(err)
	}
	n, err := st.DisableSnapshotRead(ctx)
	if err != nil || n != 7 {
		t.Fatalf("turned off: %d marked sent, want 7: %v", n, err)
	}
	if on, err := st.SnapshotReadEnabled(ctx); err != nil || on {
		t.Fatalf("still enabled after the turn-off: %v %v", on, err)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'sent' AND topic = 't.a' AND sent_at IS NOT NULL`); n != 7 {
		t.Fatalf("%d of the 7 delivered rows sent", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'outbox_leases' AND column_name LIKE 'snap%'`); n != 0 {
		t.Fatalf("%d cursor columns left", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace AND proname IN ('outbox_snapshot_read', 'outbox_delivered', 'outbox_leave_snapshot')`); n != 0 {
		t.Fatalf("%d snapshot functions left", n)
	}
	// The table read delivers the 4 rows not yet delivered.
	acquireAll(t, st, "r2")
	rows, err := st.ReadMark(ctx, "r2", parts, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || rows[0].Topic != "t.b" {
		t.Fatalf("the table read gave %d rows, want the 4 undelivered", len(rows))
	}
	if _, err := st.DisableSnapshotRead(ctx); err != nil {
		t.Fatalf("again: %v", err)
	}
}

// TestSnapshotSuspectsLeft: on a database read by snapshots, the rows of
// the snapshot domain under a takeover mark are not suspects (a delivered
// one stays pending); those a takeover moved to the table domain are.
func TestSnapshotSuspectsLeft(t *testing.T) {
	db, st, parts := snapshotDB(t, "r1")
	ctx := context.Background()
	insert(t, db, st, newMsg("t.a", "k1"))
	var id int64
	var p int
	if err := db.SQL.QueryRowContext(ctx, "SELECT id, partition_no FROM outbox_messages").Scan(&id, &p); err != nil {
		t.Fatal(err)
	}
	snap := st.WithSnapshotRead()
	if left, err := snap.SuspectsLeft(ctx, map[int]int64{p: id}); err != nil || len(left) != 0 {
		t.Fatalf("a snapshot-domain row counted as a suspect: %v, %v", left, err)
	}
	// An unclean takeover moves the rows after the recorded cursor to the
	// table domain, as suspects.
	cursorsOf(t, st, "r1", parts, true)
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE outbox_txid IS NULL"); n != 1 {
		t.Fatalf("%d rows moved by the takeover, want 1", n)
	}
	if left, err := snap.SuspectsLeft(ctx, map[int]int64{p: id}); err != nil || !slices.Equal(left, []int{p}) {
		t.Fatalf("after the takeover: %v, %v; want partition %d", left, err, p)
	}
}
