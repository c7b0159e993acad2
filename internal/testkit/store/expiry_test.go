package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// downTo undoes the migrations above version v.
func downTo(t *testing.T, db *testdb.DB, v int) {
	t.Helper()
	ms, err := store.Migrations(db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(ms) - 1; i >= 0 && ms[i].Version > v; i-- {
		for _, stmt := range store.SplitStatements(ms[i].Down) {
			db.Exec(t, stmt)
		}
		db.Exec(t, "DELETE FROM outbox_schema_migrations WHERE version = "+strconv.Itoa(ms[i].Version))
	}
}

// TestMigrateTo19KeepsRows: a table at version 18 holding rows of every
// status migrates to 19 with its rows, ids and statuses as they were; the
// next id follows the highest ever given (SQLite builds the table again);
// the status expired is taken and an unknown one still refused; the
// version 17 rules still hold; and back down to 18, expired rows are dead.
func TestMigrateTo19KeepsRows(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			downTo(t, db, 18)
			db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('a', 'k', '{}'), ('b', 'k', '{}'), ('c', NULL, '{}'), ('gone', NULL, '{}')`)
			db.Exec(t, `UPDATE outbox_messages SET status = 'sent' WHERE topic = 'b'`)
			db.Exec(t, `UPDATE outbox_messages SET status = 'dead', last_error = 'boom' WHERE topic = 'c'`)
			db.Exec(t, `DELETE FROM outbox_messages WHERE topic = 'gone'`)
			before := statusErr(t, db)
			top := db.Count(t, "SELECT count(*) FROM outbox_messages") + 1 // the ids were 1..4
			testdb.Migrate(t, db)
			if got := statusErr(t, db); len(got) != 3 || got["a"] != before["a"] || got["b"] != before["b"] || got["c"] != before["c"] {
				t.Fatalf("rows %v after the migration, were %v", got, before)
			}
			if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE expires_at IS NULL"); n != 3 {
				t.Fatalf("%d rows without expiry, want 3", n)
			}
			db.Exec(t, `INSERT INTO outbox_messages (topic, payload, expires_at) VALUES ('new', '{}', `+testdb.Ago(d, -time.Hour)+`)`)
			if n := db.Count(t, "SELECT max(id) FROM outbox_messages"); n <= top {
				t.Fatalf("new row got id %d; ids up to %d were given before", n, top)
			}
			db.Exec(t, `UPDATE outbox_messages SET status = 'expired' WHERE topic = 'new'`)
			if _, err := db.SQL.Exec(`UPDATE outbox_messages SET status = 'paused' WHERE topic = 'a'`); err == nil {
				t.Fatal("an unknown status was taken")
			}
			if d != store.Postgres { // PostgreSQL's jsonb refuses it by type
				if _, err := db.SQL.Exec(`INSERT INTO outbox_messages (topic, payload, headers) VALUES ('bad', '{}', '[]')`); err == nil {
					t.Fatal("headers that are not an object were taken")
				}
			}
			downTo(t, db, 18)
			if got := statusErr(t, db); !strings.HasPrefix(got["new"], "dead") || got["a"] != before["a"] {
				t.Fatalf("rows %v after undoing 19", got)
			}
			testdb.Migrate(t, db)
		})
	}
}

// TestExpiry: a row whose expires_at has come is never read; Expire moves it to expired with the reason, only in
// the owner's partitions, after which it no longer holds back its key; it
// counts as expired; a requeue brings it back
// without its expiry; an outcome recorded for a row that expired while it
// was published is kept unless it is a retry.
func TestExpiry(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			st := db.Store()
			ctx := context.Background()
			db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload, expires_at, attempts, last_error, available_at) VALUES
				('k.first', 'k', '{}', `+testdb.Ago(d, time.Second)+`, 1, 'HTTP 503', `+testdb.Ago(d, -time.Hour)+`)`)
			db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload, expires_at) VALUES
				('k.second', 'k', '{}', NULL), ('later', NULL, '{}', `+testdb.Ago(d, -time.Hour)+`), ('past', NULL, '{}', `+testdb.Ago(d, time.Hour)+`)`)
			// On MySQL the expired head of k holds the key until it is
			// moved to expired (its waiting-rows index has no expires_at).
			want := "k.second later"
			if d == store.MySQL {
				want = "later"
			}
			if got := strings.Join(topicsOf(readAll(t, st, "r1")), " "); got != want {
				t.Fatalf("read %q, want %q: the rows that have not expired", got, want)
			}
			if n, err := st.Expire(ctx, "someone-else"); err != nil || n != 0 {
				t.Fatalf("expire by a relay holding nothing: %d, %v", n, err)
			}
			n, err := st.Expire(ctx, "r1")
			if err != nil || n != 2 {
				t.Fatalf("expired %d, %v; want 2", n, err)
			}
			rows := readAll(t, st, "r1")
			if got := strings.Join(topicsOf(rows), " "); got != "k.second later" {
				t.Fatalf("read %q after the expiry, want k.second later", got)
			}
			got := statusErr(t, db)
			if got["past"] != "expired expired: its expires_at came before it was delivered" ||
				got["k.first"] != "expired expired: its expires_at came before it was delivered (1 attempt; last error: HTTP 503)" {
				t.Fatalf("after expiry: %v", got)
			}
			stats, err := st.Stats(ctx)
			if err != nil || stats.Expired != 2 || stats.Pending != 2 {
				t.Fatalf("stats %+v, %v", stats, err)
			}
			// A row read before it expired and confirmed after: sent.
			later := rows[1]
			db.Exec(t, `UPDATE outbox_messages SET status = 'expired' WHERE topic = 'later'`)
			if _, err := st.Settle(ctx, "r1", []store.Outcome{{ID: later.ID, Status: store.StatusSent, Partition: later.Partition}}); err != nil {
				t.Fatal(err)
			}
			if s := statusErr(t, db)["later"]; !strings.HasPrefix(s, "sent") {
				t.Fatalf("later: %q, want sent", s)
			}
			// A retry of a row that expired meanwhile is not written.
			second := rows[0]
			db.Exec(t, `UPDATE outbox_messages SET status = 'expired' WHERE topic = 'k.second'`)
			if _, err := st.Settle(ctx, "r1", []store.Outcome{{ID: second.ID, Status: store.StatusPending, Delay: time.Second, Error: "x", CountAttempt: true, Partition: second.Partition}}); err != nil {
				t.Fatal(err)
			}
			if s := statusErr(t, db)["k.second"]; !strings.HasPrefix(s, "expired") {
				t.Fatalf("k.second: %q, want still expired", s)
			}
			id := db.Strings(t, "SELECT message_id FROM outbox_messages WHERE topic = 'past'")[0]
			if err := st.RequeueOne(ctx, id); err != nil {
				t.Fatal(err)
			}
			if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 'past' AND status = 'pending' AND expires_at IS NULL AND attempts = 0"); n != 1 {
				t.Fatal("the requeued message is not pending without its expiry")
			}
			if got := strings.Join(topicsOf(readAll(t, st, "r1")), " "); got != "past" {
				t.Fatalf("read %q after the requeue, want past", got)
			}
			n, err = st.Bulk(ctx, store.ActionDiscard, store.BulkFilter{Status: store.StatusExpired}, store.BulkOptions{})
			if err != nil || n != 2 {
				t.Fatalf("discarded %d expired, %v; want 2", n, err)
			}
		})
	}
}

// TestInsertExpiresAt: a message inserted with an expiry has it in
// expires_at, one inserted with a relative one (ExpiresIn) has the
// database's now() plus it, one inserted without has none, alone or in a
// batch.
func TestInsertExpiresAt(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
			msg := func(topic string, exp time.Time) store.NewMessage {
				return store.NewMessage{MessageID: uuid.NewString(), Topic: topic, Payload: "{}", Headers: "{}", ExpiresAt: exp, FreshID: true}
			}
			rel := func(topic string, in time.Duration) store.NewMessage {
				return store.NewMessage{MessageID: uuid.NewString(), Topic: topic, Payload: "{}", Headers: "{}", ExpiresIn: in, FreshID: true}
			}
			for _, batch := range [][]store.NewMessage{
				{msg("one", at)},
				{msg("batch.a", at), msg("batch.b", time.Time{}), msg("batch.c", at)},
				{rel("rel.a", 2*time.Hour), msg("rel.b", time.Time{})},
			} {
				if err := db.Store().Insert(context.Background(), db.Store().DB(), batch); err != nil {
					t.Fatal(err)
				}
			}
			if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE expires_at IS NOT NULL"); n != 4 {
				t.Fatalf("%d rows with an expiry, want 4", n)
			}
			if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 'rel.a' AND expires_at > "+testdb.Ago(d, -119*time.Minute)+" AND expires_at < "+testdb.Ago(d, -121*time.Minute)); n != 1 {
				t.Fatalf("the relative expiry is not the database's now() + 2 h")
			}
			if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE expires_at IS NOT NULL AND expires_at > "+testdb.Ago(d, -59*time.Minute)+" AND expires_at < "+testdb.Ago(d, -61*time.Minute)); n != 3 {
				t.Fatalf("%d rows expire in an hour, want 3", n)
			}
		})
	}
}
