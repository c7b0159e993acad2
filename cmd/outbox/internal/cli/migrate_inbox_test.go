package cli

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// handleOnce applies message id through an inbox on db and reports
// whether it ran.
func handleOnce(t *testing.T, db *testdb.DB, id string) bool {
	t.Helper()
	ib, err := inbox.New(db.Std, &inbox.Config{Consumer: "inventory"})
	if err != nil {
		t.Fatal(err)
	}
	applied, err := ib.Handle(context.Background(), id, func(context.Context, *sql.Tx) error { return nil })
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	return applied
}

func hasTable(db *testdb.DB, table string) bool {
	_, err := db.SQL.ExecContext(context.Background(), "SELECT count(*) FROM "+table)
	return err == nil
}

// TestMigrateInboxOnly: --inbox-only creates outbox_inbox and no outbox,
// the inbox works on it, and a later full migrate adds the outbox while
// the inbox keeps its records.
func TestMigrateInboxOnly(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.Empty(t, d)
		r := run(t, nil, "migrate", "--db", db.URL, "--inbox-only").ok(t)
		if !strings.HasPrefix(r.stdout, "applied the inbox part of migration 1") {
			t.Errorf("inbox-only migrate: %q", r.stdout)
		}
		if hasTable(db, "outbox_messages") || hasTable(db, "outbox_leases") {
			t.Error("--inbox-only created outbox tables")
		}
		if r := run(t, nil, "migrate", "--db", db.URL, "--inbox-only").ok(t); !strings.Contains(r.stdout, "outbox_inbox is up to date") {
			t.Errorf("second inbox-only migrate: %q", r.stdout)
		}
		const id = "0192f0c4-3a6e-7cc4-9a3b-1f2e3d4c5b6a"
		if !handleOnce(t, db, id) || handleOnce(t, db, id) {
			t.Fatal("the inbox did not apply once, then dedupe")
		}
		run(t, dbVars(db), "status").failed(t, ExitFailure, "outbox migrate")

		r = run(t, nil, "migrate", "--db", db.URL).ok(t)
		if !strings.HasPrefix(r.stdout, "applied migration") || !strings.Contains(r.stdout, " 1") {
			t.Errorf("full migrate after inbox-only: %q", r.stdout)
		}
		db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('order.created', 'order-42', '{"order_id":42}')`)
		if st := status(t, dbVars(db)); st.Pending != 1 {
			t.Errorf("status after full migrate: %+v", st)
		}
		if handleOnce(t, db, id) {
			t.Error("the inbox forgot a record across the full migrate")
		}
		if r := run(t, nil, "migrate", "--db", db.URL, "--inbox-only").ok(t); !strings.Contains(r.stdout, "up to date") {
			t.Errorf("inbox-only after full migrate: %q", r.stdout)
		}
		if r := run(t, nil, "migrate", "--db", db.URL).ok(t); !strings.Contains(r.stdout, "up to date") {
			t.Errorf("full migrate again: %q", r.stdout)
		}
	})
}

// TestMigrateSQLInboxOnly: the printed inbox-only schema, applied by
// hand, is an inbox that works, and a later full migrate still succeeds.
func TestMigrateSQLInboxOnly(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		r := run(t, nil, "migrate", "sql", "--dialect", string(d), "--inbox-only").ok(t)
		if !strings.Contains(r.stdout, "CREATE TABLE outbox_inbox") || strings.Contains(r.stdout, "outbox_messages") {
			t.Fatalf("inbox-only schema:\n%s", r.stdout)
		}
		db := testdb.Empty(t, d)
		for _, stmt := range strings.Split(r.stdout, ";\n") {
			var code []string
			for _, line := range strings.Split(stmt, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "--") {
					code = append(code, line)
				}
			}
			if s := strings.TrimSpace(strings.Join(code, "\n")); s != "" {
				db.Exec(t, s)
			}
		}
		if !handleOnce(t, db, "id-1") || handleOnce(t, db, "id-1") {
			t.Fatal("the inbox did not apply once, then dedupe")
		}
		run(t, nil, "migrate", "--db", db.URL).ok(t)
		if !hasTable(db, "outbox_messages") || handleOnce(t, db, "id-1") {
			t.Error("full migrate after the printed inbox schema: no outbox, or the inbox lost its record")
		}
	})
}
