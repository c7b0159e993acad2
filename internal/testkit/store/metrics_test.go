package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
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

// TestOldestDueAge: the due age counts from available_at, so a delayed
// message and a requeued old dead letter do not look stuck, while the
// created-at age still shows how old they are.
func TestOldestDueAge(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		both := func() (store.GaugeSample, store.Stats) {
			t.Helper()
			g, err := st.Gauges(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s, err := st.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return g, s
		}
		// A dead letter enqueued two days ago, and a message delayed by an
		// hour.
		old := newMsg("due.requeued", "")
		insert(t, db, st, old)
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET status = 'dead', created_at = "+hoursAgo(db.Dialect, 48)+
			", available_at = "+hoursAgo(db.Dialect, 47)+" WHERE message_id = ?"), old.MessageID)
		delayed := newMsg("due.delayed", "")
		delayed.Delay = time.Hour
		insert(t, db, st, delayed)
		g, s := both()
		if g.Pending != 1 || g.OldestDueAge != 0 || s.OldestDueAge != 0 {
			t.Fatalf("a message delayed by an hour: due age %v (stats %v), want 0", g.OldestDueAge, s.OldestDueAge)
		}

		if err := st.RequeueOne(ctx, old.MessageID); err != nil {
			t.Fatal(err)
		}
		g, s = both()
		if g.OldestPendingAge < 47*time.Hour || s.OldestPendingAge < 47*time.Hour {
			t.Fatalf("created-at age after requeueing a two-day-old message: %v (stats %v), want about 48h", g.OldestPendingAge, s.OldestPendingAge)
		}
		if g.OldestDueAge > time.Minute || s.OldestDueAge > time.Minute {
			t.Fatalf("due age right after a requeue: %v (stats %v), want about 0", g.OldestDueAge, s.OldestDueAge)
		}

		// A message due for 90 seconds and not delivered is the oldest due.
		waiting := newMsg("due.waiting", "")
		insert(t, db, st, waiting)
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET available_at = "+ninetySecondsAgo[db.Dialect]+" WHERE message_id = ?"), waiting.MessageID)
		g, s = both()
		for _, age := range []time.Duration{g.OldestDueAge, s.OldestDueAge} {
			if age < 89*time.Second || age > 10*time.Minute {
				t.Fatalf("due age of a message due 90 s ago: %v (stats %v), want about 90s", g.OldestDueAge, s.OldestDueAge)
			}
		}
	})
}

// TestOldestDueAgeUsesIndex: on a table of many settled rows, PostgreSQL
// answers the due-age sample from the due-rows index, not by a scan.
func TestOldestDueAgeUsesIndex(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	db.Exec(t, "INSERT INTO outbox_messages (topic, payload, status, sent_at) SELECT 'big.table', 'x', 'sent', now() FROM generate_series(1, 50000)")
	db.Exec(t, "INSERT INTO outbox_messages (topic, payload, available_at) SELECT 'big.table', 'x', now() + (g % 7 - 3) * interval '1 hour' FROM generate_series(1, 2000) AS g")
	db.Exec(t, "ANALYZE outbox_messages")
	plan := explain(t, db, store.OldestDueSQL(store.Postgres))
	if !strings.Contains(plan, "outbox_messages_due_idx") || strings.Contains(plan, "Seq Scan") {
		t.Fatalf("the due-age sample does not read the due-rows index:\n%s", plan)
	}
}
