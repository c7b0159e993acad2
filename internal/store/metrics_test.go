package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

func TestGauges(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		g, err := st.Gauges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if g.Pending != 0 || g.Dead != 0 || g.OldestPendingAge != 0 {
			t.Fatalf("empty table: %+v", g)
		}
		if d := time.Since(g.Now); d < -time.Minute || d > time.Minute {
			t.Fatalf("database clock %v is far from the host's", g.Now)
		}
		in := []store.NewMessage{newMsg("a.b", ""), newMsg("a.b", "k"), newMsg("c.d", ""), newMsg("c.d", ""), newMsg("e.f", "")}
		insert(t, db, st, in...)
		// Age the first row, kill two and send one: sent rows are not counted
		// anywhere.
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET created_at = "+ninetySecondsAgo[db.Dialect]+" WHERE message_id = ?"), in[0].MessageID)
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET status = 'dead' WHERE message_id IN (?, ?)"), in[2].MessageID, in[3].MessageID)
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET status = 'sent' WHERE message_id = ?"), in[4].MessageID)
		g, err = st.Gauges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if g.Pending != 2 || g.Dead != 2 {
			t.Fatalf("pending %d dead %d, want 2 and 2", g.Pending, g.Dead)
		}
		if g.OldestPendingAge < 89*time.Second || g.OldestPendingAge > 10*time.Minute {
			t.Fatalf("oldest pending age %v, want about 90s", g.OldestPendingAge)
		}
	})
}

// ninetySecondsAgo is the database clock minus 90 s, per dialect.
var ninetySecondsAgo = map[store.Dialect]string{
	store.Postgres: "now() - interval '90 seconds'",
	store.MySQL:    "NOW(6) - INTERVAL 90 SECOND",
	store.SQLite:   "strftime('%Y-%m-%d %H:%M:%f', 'now', '-90 seconds')",
}
