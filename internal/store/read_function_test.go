package store_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// explainRead runs prefix (an EXPLAIN) over the relay's read as
// outbox_read runs it — its body, with its settings — and returns the
// output, one line per row.
func explainRead(t *testing.T, db *testdb.DB, prefix string, args ...any) string {
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
	rows, err := tx.Query(ctx, prefix+store.ReadSQL(store.Postgres), args...)
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

// TestReadFunctionMatchesStatement: the body of outbox_read, as installed
// by the migrations, is the relay's read statement (parameters renamed),
// so what the tests EXPLAIN is what the relay runs.
func TestReadFunctionMatchesStatement(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	var body string
	if err := db.Pool.QueryRow(context.Background(), "SELECT prosrc FROM pg_proc WHERE proname = 'outbox_read'").Scan(&body); err != nil {
		t.Fatal(err)
	}
	space := regexp.MustCompile(`\s+`)
	norm := func(s string) string { return strings.TrimSpace(space.ReplaceAllString(s, " ")) }
	want := strings.NewReplacer("$1::int[]", "parts", "$2", "lim").Replace(store.ReadSQL(store.Postgres))
	if norm(body) != norm(want) {
		t.Errorf("outbox_read's body differs from the read statement:\nfunction:  %s\nstatement: %s", norm(body), norm(want))
	}
}

// TestReadPlanIgnoresEmptyStatistics: with statistics taken while the
// table was empty, the planner left alone scans the whole table for every
// pending row; the relay's read still walks the indexes.
func TestReadPlanIgnoresEmptyStatistics(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	db.Exec(t, "ANALYZE outbox_messages")
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload)
		SELECT 'order.created', 'customer-' || (g % 500), '{}' FROM generate_series(1, 5000) AS g`)
	parts := make([]int32, 64)
	for i := range parts {
		parts[i] = int32(i)
	}
	plan := explainRead(t, db, "EXPLAIN ", parts, 1000)
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
