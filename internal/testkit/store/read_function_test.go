package store_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// explainRead runs prefix (an EXPLAIN) over the relay's read as
// outbox_read runs it — its body, with its settings — and returns the
// output, one line per row.
func explainRead(t *testing.T, db *testdb.DB, prefix string, parts []int32, limit int) string {
	t.Helper()
	return explainPrepared(t, db, "outbox_read_explain(bigint, int[], int) AS "+store.ReadSQL(store.Postgres),
		prefix+"EXECUTE outbox_read_explain(1048576, "+literal(t, parts)+", "+strconv.Itoa(limit)+")")
}

// explainPrepared prepares statement (NAME(types) AS body) with the
// settings the relay's functions run their bodies with, runs query (an
// EXPLAIN of its EXECUTE) in a transaction it rolls back, and returns the
// output, one line per row. The functions keep one generic plan per
// connection: with plan_cache_mode the plan shown is that one.
func explainPrepared(t *testing.T, db *testdb.DB, statement, query string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range store.ReadSettings {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, "PREPARE "+statement); err != nil {
		t.Fatal(err)
	}
	name, _, _ := strings.Cut(statement, "(")
	defer func() { _, _ = tx.Exec(ctx, "DEALLOCATE "+name) }()
	rows, err := tx.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// literal renders partition numbers as an int[] literal: EXECUTE takes no
// statement parameters.
func literal(t *testing.T, parts []int32) string {
	t.Helper()
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = strconv.Itoa(int(p))
	}
	return "'{" + strings.Join(s, ",") + "}'::int[]"
}

// TestFunctionsMatchStatements: the bodies of outbox_read and
// outbox_settle, as installed by the migrations, are the relay's read and
// settle statements (parameters renamed), so what the tests EXPLAIN is what
// the relay runs.
func TestFunctionsMatchStatements(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	space := regexp.MustCompile(`\s+`)
	norm := func(s string) string { return strings.TrimSpace(space.ReplaceAllString(s, " ")) }
	for _, c := range []struct {
		fn, want string
	}{
		{"outbox_read(int[], int, bigint)", "BEGIN RETURN QUERY " +
			strings.NewReplacer("$1::bigint", "max_bytes", "$2::int[]", "parts", "$3", "lim").Replace(store.ReadSQL(store.Postgres)) + "; END"},
		{"outbox_settle(bigint[], text[], bigint[], text[], int[], boolean[], text)", "DECLARE n bigint; BEGIN PERFORM set_config('synchronous_commit', 'off', true); " +
			strings.NewReplacer("$1::bigint[]", "ids", "$2::text[]", "statuses", "$3::bigint[]", "delays", "$4::text[]", "errs",
				"$5::int[]", "incs", "$6::bool[]", "unknowns", "$7", "owner_id").Replace(store.SettleSQL(store.Postgres)) +
			"; GET DIAGNOSTICS n = ROW_COUNT; RETURN n; END"},
	} {
		var body string
		if err := db.Pool.QueryRow(context.Background(), "SELECT prosrc FROM pg_proc WHERE oid = $1::regprocedure", c.fn).Scan(&body); err != nil {
			t.Fatal(err)
		}
		if norm(body) != norm(c.want) {
			t.Errorf("%s's body differs from the relay's statement:\nfunction:  %s\nstatement: %s", c.fn, norm(body), norm(c.want))
		}
	}
}

// analyzedEmpty is a migrated PostgreSQL outbox whose statistics were
// taken while it was empty, holding 5,000 pending rows of 500 keys since.
func analyzedEmpty(t *testing.T) *testdb.DB {
	t.Helper()
	db := testdb.New(t, store.Postgres)
	db.Exec(t, "ANALYZE outbox_messages")
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload)
		SELECT 'order.created', 'customer-' || (g % 500), '{}' FROM generate_series(1, 5000) AS g`)
	return db
}

// TestReadPlanIgnoresEmptyStatistics: with statistics taken while the
// table was empty, the planner left alone scans the whole table for every
// pending row; the relay's read still walks the indexes.
func TestReadPlanIgnoresEmptyStatistics(t *testing.T) {
	t.Parallel()
	db := analyzedEmpty(t)
	parts := make([]int32, 64)
	for i := range parts {
		parts[i] = int32(i)
	}
	plan := explainRead(t, db, "EXPLAIN ", parts, 1000)
	if !strings.Contains(plan, "ANY ($2)") {
		t.Errorf("read plan is not the generic plan the function keeps:\n%s", plan)
	}
	if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "Index Scan using outbox_messages_pending_idx") {
		t.Errorf("read plan on a table analyzed empty:\n%s", plan)
	}
	// And through the function, as the relay calls it: every row comes back.
	all := make([]int, 64)
	for i := range all {
		all[i] = i
	}
	rows, err := db.Store().Read(context.Background(), all, 1000)
	if err != nil || len(rows) != 1000 {
		t.Fatalf("read %d rows, %v; want 1000", len(rows), err)
	}
}

// TestReadPlanProbesTheKeyOfOneHotKey: with statistics taken on a
// backlog of one key, the read still checks each row's key through the
// waiting-rows index (outbox_messages_waiting_idx), instead of walking
// the pending rows below it for every row it takes (schema version 21).
func TestReadPlanProbesTheKeyOfOneHotKey(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload)
		SELECT 'order.created', 'customer-1', '{}' FROM generate_series(1, 5000)`)
	db.Exec(t, "ANALYZE outbox_messages")
	parts := make([]int32, 64)
	for i := range parts {
		parts[i] = int32(i)
	}
	plan := explainRead(t, db, "EXPLAIN ", parts, 1000)
	if !strings.Contains(plan, "Index Scan using outbox_messages_waiting_idx") {
		t.Errorf("read plan after ANALYZE of a one-key backlog does not probe the key:\n%s", plan)
	}
}

// TestBookkeepingCommitsAsync: the relay's settle and in-flight marks turn
// synchronous_commit off for their own transaction only — the caller's
// next transaction on the connection is durable again.
func TestBookkeepingCommitsAsync(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	db.Exec(t, "UPDATE outbox_leases SET owner = 'r', expires_at = now() + interval '1 minute'")
	show := func() string {
		var v string
		if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name, sql string
		args      []any
	}{
		{"settle function", store.SettleCallSQL(store.Postgres), []any{[]int64{1}, []string{"sent"}, []int64{0}, []*string{nil}, []int32{1}, []bool{false}, "r"}},
		{"in-flight mark", store.MarkInflightSQL(store.Postgres), []any{[]int32{0, 1}, []int64{7, 9}, "r"}},
	} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, c.sql, c.args...); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var v string
		if err := tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if v != "off" {
			t.Errorf("%s: synchronous_commit in its transaction = %q, want off", c.name, v)
		}
		if after := show(); after != "on" {
			t.Errorf("%s: synchronous_commit after its transaction = %q, want on", c.name, after)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_leases WHERE inflight_max_id IN (7, 9)"); n != 2 {
		t.Errorf("in-flight marks written: %d, want 2", n)
	}
}

// TestSettlePlanLooksUpItsRows: with statistics taken while the table was
// empty, the settle's generic plan (the one outbox_settle keeps for the
// connection's life) still finds its outcomes' rows by id, instead of
// walking every pending row for each settle.
func TestSettlePlanLooksUpItsRows(t *testing.T) {
	t.Parallel()
	db := analyzedEmpty(t)
	var id int64
	if err := db.Pool.QueryRow(context.Background(), "SELECT max(id) FROM outbox_messages").Scan(&id); err != nil {
		t.Fatal(err)
	}
	plan := explainPrepared(t, db, "outbox_settle_explain(bigint[], text[], bigint[], text[], int[], bool[], text) AS "+store.SettleSQL(store.Postgres),
		"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE outbox_settle_explain(ARRAY["+strconv.FormatInt(id, 10)+"]::bigint[], '{sent}', '{0}', '{NULL}', '{1}', '{false}', 'r1')")
	if strings.Contains(plan, "pending_idx") || strings.Contains(plan, "due_idx") || !strings.Contains(plan, "Index Cond: (id = u.id)") {
		t.Errorf("a settle of one outcome on a table analyzed empty does not look its row up by id:\n%s", plan)
	}
}
