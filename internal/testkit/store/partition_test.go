package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// dayName is the day partition of the UTC day daysAgo days before today.
func dayName(daysAgo int) string {
	return "outbox_messages_p" + time.Now().UTC().AddDate(0, 0, -daysAgo).Format("20060102")
}

// dayID is SQL for a fresh version 7 message id in the UTC day daysAgo
// days before today.
func dayID(daysAgo int) string {
	return fmt.Sprintf(`(substr(replace(outbox_uuid_v7_floor((now() AT TIME ZONE 'UTC')::date - %d)::text, '-', ''), 1, 12)
  || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid`, daysAgo)
}

// partitionOf is the table the row with message id mid is stored in.
func partitionOf(t *testing.T, db *testdb.DB, mid string) string {
	t.Helper()
	var name string
	if err := db.SQL.QueryRow("SELECT tableoid::regclass::text FROM outbox_messages WHERE message_id = $1", mid).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestPartitionedMigration: the partitioned layout is a partitioned table
// with today and three days ahead, is detected from the catalog, takes
// the later migrations, and is refused over an unpartitioned table.
func TestPartitionedMigration(t *testing.T) {
	t.Parallel()
	db := testdb.NewPartitioned(t)
	st := db.Store()
	on, err := st.Partitioned(context.Background())
	if err != nil || !on {
		t.Fatalf("partitioned = %v, %v", on, err)
	}
	parts := db.Attached(t)
	for d := 0; d >= -3; d-- {
		if !parts[dayName(d)] {
			t.Errorf("no partition %s among %v", dayName(d), parts)
		}
	}
	if !parts[store.DefaultPartition] {
		t.Errorf("no default partition among %v", parts)
	}
	if v, err := store.SchemaVersion(context.Background(), st.DB()); err != nil || v < 3 {
		t.Fatalf("schema version %d, %v", v, err)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages_archive"); n != 0 {
		t.Fatalf("archive holds %d rows", n)
	}

	plain := testdb.New(t, store.Postgres)
	if on, err := plain.Store().Partitioned(context.Background()); err != nil || on {
		t.Fatalf("unpartitioned table seen as partitioned: %v, %v", on, err)
	}
	s, err := plain.Backend().Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = store.MigrateWith(context.Background(), store.Postgres, s, store.MigrateOptions{Partitioned: true})
	if err == nil || !strings.Contains(err.Error(), "not partitioned") {
		t.Fatalf("partitioned migration over a plain table: %v", err)
	}
	if _, err := store.MigrationsWith(store.MySQL, store.MigrateOptions{Partitioned: true}); err == nil {
		t.Fatal("a partitioned layout on MySQL was accepted")
	}
	sql, err := store.SchemaSQLWith(store.Postgres, store.MigrateOptions{Partitioned: true})
	if err != nil || !strings.Contains(sql, "PARTITION BY RANGE (message_id)") || !strings.Contains(sql, "CREATE TABLE outbox_audit") {
		t.Fatalf("partitioned schema SQL: %v\n%s", err, sql)
	}
}

// TestPartitionedForeignInsertLandsInToday: an INSERT that leaves
// message_id out gets a version 7 id of today, so the row is stored in
// today's partition, not the default one.
func TestPartitionedForeignInsertLandsInToday(t *testing.T) {
	t.Parallel()
	db := testdb.NewPartitioned(t)
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('order.created', 'order-42', '{"order_id":42}')`)
	var mid string
	if err := db.SQL.QueryRow("SELECT message_id::text FROM outbox_messages").Scan(&mid); err != nil {
		t.Fatal(err)
	}
	if len(mid) != 36 || mid[14] != '7' || strings.ToLower(mid) != mid {
		t.Fatalf("message_id %q is not a lowercase version 7 UUID", mid)
	}
	if got := partitionOf(t, db, mid); got != dayName(0) {
		t.Fatalf("row stored in %s, want %s", got, dayName(0))
	}
}

// TestPartitionedDuplicateMessageID: message_id is unique across the
// whole table, in day partitions and in the default one.
func TestPartitionedDuplicateMessageID(t *testing.T) {
	t.Parallel()
	db := testdb.NewPartitioned(t)
	st := db.Store()
	v7 := newMsg("t.x", "k")
	v7.MessageID = "01900000-0000-7000-8000-000000000001" // 2024: the default partition
	today := newMsg("t.x", "k")
	if err := db.SQL.QueryRow("SELECT outbox_uuid_v7()::text").Scan(&today.MessageID); err != nil {
		t.Fatal(err)
	}
	insert(t, db, st, v7, today)
	if got := partitionOf(t, db, today.MessageID); got != dayName(0) {
		t.Fatalf("today's id stored in %s", got)
	}
	for _, m := range []store.NewMessage{v7, today} {
		tx, err := db.SQL.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = st.Insert(context.Background(), db.Std.UnwrapExecutor(tx), []store.NewMessage{newMsg("t.y", ""), m})
		_ = tx.Rollback()
		var dup *store.DuplicateError
		if !errors.As(err, &dup) || len(dup.MessageIDs) != 1 || dup.MessageIDs[0] != m.MessageID {
			t.Fatalf("insert of existing %s: %v", m.MessageID, err)
		}
	}
}

// TestDropPartition: a day partition goes only when it holds no pending
// row; with archive it stays as a plain table. PartitionState says when
// its last row is due.
func TestDropPartition(t *testing.T) {
	t.Parallel()
	db := testdb.NewPartitioned(t)
	st := db.Store()
	ctx := context.Background()
	if n, err := st.AddPartitions(ctx, -12, -10); err != nil || n != 3 {
		t.Fatalf("created %d past partitions: %v", n, err)
	}
	for _, d := range []int{12, 11, 10} {
		db.Exec(t, `INSERT INTO outbox_messages (message_id, topic, payload, status, created_at, sent_at)
SELECT `+dayID(d)+`, 't.old', '{}', 'sent', now() - interval '1 day' * $1, now() - interval '1 day' * $1 FROM generate_series(1, 5)`, d)
	}
	db.Exec(t, `INSERT INTO outbox_messages (message_id, topic, payload) VALUES (`+dayID(11)+`, 't.pending', '{}')`)
	db.Exec(t, `INSERT INTO outbox_messages (message_id, topic, payload, status, created_at, available_at) VALUES (`+dayID(10)+`, 't.dead', '{}', 'dead', now() - interval '10 days', now() - interval '1 hour')`)
	days, err := st.DayPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]store.DayPartition{}
	for _, p := range days {
		byName[p.Name] = p
	}
	p := store.RetentionPolicy{Sent: time.Hour, Dead: 4 * time.Hour}

	old := byName[dayName(12)]
	s, err := st.PartitionState(ctx, old.Name, p)
	if err != nil || s.Rows != 5 || s.Pending != 0 || s.DueIn > -9*24*time.Hour {
		t.Fatalf("state of %s: %+v, %v", old.Name, s, err)
	}
	held := byName[dayName(11)]
	if s, err := st.PartitionState(ctx, held.Name, p); err != nil || s.Rows != 6 || s.Pending != 1 {
		t.Fatalf("state of %s: %+v, %v", held.Name, s, err)
	}
	young := byName[dayName(10)]
	if s, err := st.PartitionState(ctx, young.Name, p); err != nil || s.Pending != 0 || s.DueIn < 2*time.Hour || s.DueIn > 3*time.Hour {
		t.Fatalf("state of %s: %+v, %v (the dead row is due in 3 h)", young.Name, s, err)
	}

	if dropped, err := st.DropPartition(ctx, held, false); err != nil || dropped {
		t.Fatalf("partition with a pending row dropped: %v, %v", dropped, err)
	}
	if !db.Attached(t)[held.Name] || db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 't.pending'") != 1 {
		t.Fatal("refused drop changed the partition")
	}
	if dropped, err := st.DropPartition(ctx, old, false); err != nil || !dropped {
		t.Fatalf("drop %s: %v, %v", old.Name, dropped, err)
	}
	if db.Attached(t)[old.Name] || db.Count(t, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", old.Name) != 0 {
		t.Fatalf("%s still there", old.Name)
	}
	// Archiving keeps the day as a plain table.
	db.Exec(t, "UPDATE outbox_messages SET status = 'sent', sent_at = now() - interval '11 days' WHERE topic = 't.pending'")
	if dropped, err := st.DropPartition(ctx, held, true); err != nil || !dropped {
		t.Fatalf("archive %s: %v, %v", held.Name, dropped, err)
	}
	if db.Attached(t)[held.Name] {
		t.Fatalf("%s still attached", held.Name)
	}
	if n := db.Count(t, "SELECT count(*) FROM "+store.ArchiveName(held)); n != 6 {
		t.Fatalf("%s holds %d rows, want 6", store.ArchiveName(held), n)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages"); n != 6 {
		t.Fatalf("outbox_messages holds %d rows, want the young day's 6", n)
	}
	if _, err := st.DropPartition(ctx, store.DayPartition{Name: "outbox_messages; DROP TABLE x"}, false); err == nil {
		t.Fatal("a bad partition name was accepted")
	}
}

// TestPartitionStateExpired: an expired row holds its day partition for
// the dead retention from when it expired, as a dead row does, not for the
// sent retention from when it was created.
func TestPartitionStateExpired(t *testing.T) {
	t.Parallel()
	db := testdb.NewPartitioned(t)
	st := db.Store()
	ctx := context.Background()
	if n, err := st.AddPartitions(ctx, -10, -10); err != nil || n != 1 {
		t.Fatalf("created %d past partitions: %v", n, err)
	}
	db.Exec(t, `INSERT INTO outbox_messages (message_id, topic, payload, status, created_at, available_at) VALUES (`+dayID(10)+`, 't.expired', '{}', 'expired', now() - interval '10 days', now() - interval '1 hour')`)
	p := store.RetentionPolicy{Sent: time.Hour, Dead: 4 * time.Hour}
	if s, err := st.PartitionState(ctx, dayName(10), p); err != nil || s.Rows != 1 || s.Pending != 0 || s.DueIn < 2*time.Hour || s.DueIn > 3*time.Hour {
		t.Fatalf("state of %s: %+v, %v (the expired row is due in 3 h)", dayName(10), s, err)
	}
	db.Exec(t, `UPDATE outbox_messages SET available_at = now() - interval '5 hours' WHERE topic = 't.expired'`)
	if s, err := st.PartitionState(ctx, dayName(10), p); err != nil || s.DueIn > -time.Hour+time.Minute || s.DueIn < -time.Hour-time.Minute {
		t.Fatalf("state of %s: %+v, %v (the expired row was due an hour ago)", dayName(10), s, err)
	}
}

// TestAddPartitionsLeavesDaysInDefault: a day whose rows already went to
// the default partition (no partition existed) stays there; the others
// are created.
func TestAddPartitionsLeavesDaysInDefault(t *testing.T) {
	t.Parallel()
	db := testdb.NewPartitioned(t)
	st := db.Store()
	db.Exec(t, `INSERT INTO outbox_messages (message_id, topic, payload) VALUES (`+dayID(-6)+`, 't.future', '{}')`)
	n, err := st.AddPartitions(context.Background(), 0, 7)
	if err != nil || n != 3 {
		t.Fatalf("created %d partitions (want days 4, 5 and 7): %v", n, err)
	}
	parts := db.Attached(t)
	if parts[dayName(-6)] || !parts[dayName(-5)] || !parts[dayName(-7)] {
		t.Fatalf("partitions %v", parts)
	}
	if n, err := st.AddPartitions(context.Background(), 0, 7); err != nil || n != 0 {
		t.Fatalf("second call created %d: %v", n, err)
	}
}

// TestPartitionedPlans: over several day partitions, the relay's read
// walks the pending indexes in id order and settle finds each row by id
// in an index of every partition, never a scan of one that holds rows.
func TestPartitionedPlans(t *testing.T) {
	t.Parallel()
	db := testdb.NewPartitioned(t)
	if _, err := db.Store().AddPartitions(context.Background(), -3, -1); err != nil {
		t.Fatal(err)
	}
	for d := 3; d >= -2; d-- {
		db.Exec(t, `INSERT INTO outbox_messages (message_id, topic, business_key, payload, status, sent_at)
SELECT `+dayID(d)+`, 't.x', 'k' || (g % 50), '{}', CASE WHEN g % 10 = 0 THEN 'pending' ELSE 'sent' END,
       CASE WHEN g % 10 = 0 THEN NULL ELSE now() END FROM generate_series(1, 20000) AS g`)
	}
	db.Exec(t, "ANALYZE outbox_messages")
	parts := make([]int32, 64)
	for i := range parts {
		parts[i] = int32(i)
	}
	// The empty partitions (three days ahead, the default one) may be
	// scanned: they hold nothing.
	empty := map[string]bool{dayName(-3): true, store.DefaultPartition: true}
	seqScans := func(plan string) []string {
		var out []string
		for _, line := range strings.Split(plan, "\n") {
			if _, rest, ok := strings.Cut(line, "Seq Scan on "); ok {
				if name, _, _ := strings.Cut(rest, " "); !empty[name] {
					out = append(out, name)
				}
			}
		}
		return out
	}
	plan := explainRead(t, db, "EXPLAIN ", parts, 1000)
	// Each partition's copy of outbox_messages_pending_idx is <partition>_id_idx.
	if s := seqScans(plan); len(s) > 0 || !strings.Contains(plan, "Merge Append") || !strings.Contains(plan, "Index Scan using "+dayName(3)+"_id_idx") {
		t.Fatalf("read plan scans %v:\n%s", s, plan)
	}
	ids := []int64{5, 25000, 70000}
	plan = explain(t, db, store.SettleSQL(store.Postgres), ids, []string{"sent", "sent", "pending"}, []int64{0, 0, 1000},
		[]string{"", "", "e"}, []int32{1, 1, 1}, []bool{false, false, false}, "r1")
	if s := seqScans(plan); len(s) > 0 || !strings.Contains(plan, "Index Cond: (id = u.id)") {
		t.Fatalf("settle plan scans %v:\n%s", s, plan)
	}
	t.Logf("settle plan over %d partitions:\n%s", len(db.Attached(t)), plan)
}

func explain(t *testing.T, db *testdb.DB, q string, args ...any) string {
	t.Helper()
	return strings.Join(db.Strings(t, "EXPLAIN "+q, args...), "\n") + "\n"
}

// TestPartitionedReadCostFlat: the relay's read touches as many buffers
// beside a million sent rows in past day partitions as beside one row in
// each, and dropping those days removes them without a row
// delete.
func TestPartitionedReadCostFlat(t *testing.T) {
	t.Parallel()
	const pending = 300
	n := bigRows()

	// The read probes each partition that holds rows once per keyed row
	// (see docs/retention.md), so the small table has the same days, with
	// one sent row each.
	small := func(perDay int) *testdb.DB {
		db := testdb.NewPartitioned(t)
		if _, err := db.Store().AddPartitions(context.Background(), -4, -2); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for d := 4; d >= 2; d-- {
			db.Exec(t, fmt.Sprintf(`INSERT INTO outbox_messages (message_id, topic, business_key, payload, status, attempts, created_at, available_at, sent_at)
SELECT %s, 'order.created', 'order-' || (g %% 5000), '{"order_id":' || g || ',"note":"%s"}', 'sent', 1, t0, t0, t0
FROM generate_series(1, %d) AS g, (SELECT now() - interval '%d days' AS t0) AS c`, dayID(d), strings.Repeat("x", 128), perDay, d))
		}
		db.Exec(t, "ANALYZE outbox_messages")
		if perDay > 1 {
			t.Logf("inserted %d sent rows into 3 past days in %v", perDay*3, time.Since(start).Round(time.Millisecond))
		}
		insertBig(t, db, pending, "pending", "1 minute")
		return db
	}
	baseBuffers, baseRows := readBuffers(t, small(1))

	db := small(n / 3)
	st := db.Store()
	ctx := context.Background()
	bigBuffers, bigRows := readBuffers(t, db)
	t.Logf("read of %d pending rows: %d buffers beside 3 sent rows in 3 past days, %d beside %d", pending, baseBuffers, bigBuffers, n/3*3)
	if baseRows != pending || bigRows != pending {
		t.Fatalf("read returned %d and %d rows, want %d", baseRows, bigRows, pending)
	}
	if bigBuffers > 2*baseBuffers+8 {
		t.Fatalf("read over %d sent rows touched %d buffers, over none %d", n, bigBuffers, baseBuffers)
	}
	days, err := st.DayPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := store.RetentionPolicy{Sent: 24 * time.Hour, Dead: 14 * 24 * time.Hour}
	start := time.Now()
	dropped := 0
	for _, day := range days {
		if !day.End().Before(time.Now().Add(-24 * time.Hour)) {
			continue
		}
		s, err := st.PartitionState(ctx, day.Name, p)
		if err != nil || s.Pending != 0 || s.DueIn > 0 {
			t.Fatalf("%s: %+v, %v", day.Name, s, err)
		}
		ok, err := st.DropPartition(ctx, day, false)
		if err != nil || !ok {
			t.Fatalf("drop %s: %v, %v", day.Name, ok, err)
		}
		dropped++
	}
	t.Logf("checked and dropped %d day partitions in %v", dropped, time.Since(start).Round(time.Millisecond))
	if dropped != 3 || db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'") != 0 ||
		db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending'") != pending {
		t.Fatalf("dropped %d partitions; rows left wrong", dropped)
	}
	afterBuffers, afterRows := readBuffers(t, db)
	t.Logf("read after dropping: %d buffers", afterBuffers)
	if afterRows != pending || afterBuffers > 2*baseBuffers+8 {
		t.Fatalf("read after dropping: %d rows, %d buffers", afterRows, afterBuffers)
	}
}
