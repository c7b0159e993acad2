package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// conformance runs fn against every store: PostgreSQL through pgx and
// through database/sql, a partitioned PostgreSQL table, MariaDB and SQLite.
func conformance(t *testing.T, fn func(t *testing.T, db *testdb.DB, st *store.Store)) {
	cases := []struct {
		name        string
		d           store.Dialect
		std         bool
		partitioned bool
	}{{"pgx", store.Postgres, false, false}, {"sql-postgres", store.Postgres, true, false}, {"pgx-partitioned", store.Postgres, false, true},
		{"mysql", store.MySQL, true, false}, {"sqlite", store.SQLite, true, false}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var db *testdb.DB
			if c.partitioned {
				db = testdb.NewPartitioned(t)
			} else {
				db = testdb.New(t, c.d)
			}
			st := db.Store()
			if c.std {
				st = store.NewBackend(db.Std).Store
			}
			fn(t, db, st)
		})
	}
}

func newMsg(topic, key string) store.NewMessage {
	return store.NewMessage{MessageID: uuid.NewString(), Topic: topic, Key: key, Payload: `{"a":1}`, Headers: `{"content-type":"application/json"}`}
}

func insert(t testing.TB, db *testdb.DB, st *store.Store, msgs ...store.NewMessage) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(ctx, db.Std.UnwrapExecutor(tx), msgs); err != nil {
		_ = tx.Rollback()
		t.Fatalf("insert: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func allParts(t testing.TB, st *store.Store) []int {
	n, err := st.Partitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	return parts
}

func acquireAll(t testing.TB, st *store.Store, owner string) []int {
	t.Helper()
	parts := allParts(t, st)
	leases, err := st.Acquire(context.Background(), owner, parts, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != len(parts) {
		t.Fatalf("acquired %d of %d partitions", len(leases), len(parts))
	}
	return parts
}

func TestForeignInsertFillsDefaults(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('order.created', 'order-42', '{"order_id":42}')`)
		ms, err := st.List(context.Background(), store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 {
			t.Fatalf("got %d rows", len(ms))
		}
		m := ms[0]
		if _, err := uuid.Parse(m.MessageID); err != nil || m.MessageID != strings.ToLower(m.MessageID) || len(m.MessageID) != 36 {
			t.Errorf("message_id %q is not a lowercase UUID", m.MessageID)
		}
		if m.Status != "pending" || m.Attempts != 0 || m.MaxAttempts != 10 || m.Headers == "" || m.Key != "order-42" {
			t.Errorf("defaults wrong: %+v", m)
		}
		if m.CreatedAt.IsZero() || time.Since(m.CreatedAt) > time.Minute || time.Since(m.CreatedAt) < -time.Minute {
			t.Errorf("created_at %v is not the database's now", m.CreatedAt)
		}
		parts := acquireAll(t, st, "r1")
		rows, err := st.Read(context.Background(), parts, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Payload != `{"order_id":42}` || !rows[0].HasKey {
			t.Fatalf("read %+v", rows)
		}
	})
}

func TestReadOrderAndSettle(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		var in []store.NewMessage
		for i := 0; i < 20; i++ {
			in = append(in, newMsg("t.x", fmt.Sprintf("k%d", i%3)))
		}
		in = append(in, newMsg("t.nokey", ""))
		insert(t, db, st, in...)
		parts := acquireAll(t, st, "r1")
		rows, err := st.Read(ctx, parts, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(in) {
			t.Fatalf("read %d rows, want %d", len(rows), len(in))
		}
		for i, r := range rows {
			if r.MessageID != in[i].MessageID {
				t.Fatalf("row %d is %s, want %s (id order = insert order)", i, r.MessageID, in[i].MessageID)
			}
			if i > 0 && r.ID <= rows[i-1].ID {
				t.Fatal("rows not in id order")
			}
		}
		// k0's first message fails and waits; k0's later messages are held
		// back, the others stay ready.
		outs := []store.Outcome{{ID: rows[0].ID, Status: store.StatusPending, Delay: time.Hour, Error: "boom", CountAttempt: true}}
		for _, r := range rows[1:5] {
			if r.Key != "k0" {
				outs = append(outs, store.Outcome{ID: r.ID, Status: store.StatusSent, CountAttempt: true})
			}
		}
		n, err := st.Settle(ctx, "r1", outs)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(len(outs)) {
			t.Fatalf("settled %d, want %d", n, len(outs))
		}
		rows2, err := st.Read(ctx, parts, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows2 {
			if r.Key == "k0" {
				t.Fatalf("k0 message %d read while an earlier k0 message waits", r.ID)
			}
		}
		if want := len(in) - len(outs) - 6; len(rows2) != want { // 7 k0 messages, 1 waiting
			t.Fatalf("read %d ready rows, want %d", len(rows2), want)
		}
		ms, err := st.List(ctx, store.Filter{MessageIDs: []string{rows[0].MessageID}})
		if err != nil || len(ms) != 1 {
			t.Fatal(err, ms)
		}
		if ms[0].Attempts != 1 || ms[0].LastError != "boom" || ms[0].Status != "pending" || time.Until(ms[0].AvailableAt) < 50*time.Minute {
			t.Fatalf("retry not recorded: %+v", ms[0])
		}
		// Dead unblocks the key.
		if _, err := st.Settle(ctx, "r1", []store.Outcome{{ID: rows[0].ID, Status: store.StatusDead, Error: "gone", CountAttempt: true}}); err != nil {
			t.Fatal(err)
		}
		rows3, _ := st.Read(ctx, parts, 100)
		k0 := 0
		for _, r := range rows3 {
			if r.Key == "k0" {
				k0++
			}
		}
		if k0 != 6 {
			t.Fatalf("after dead, %d k0 rows ready, want 6", k0)
		}
	})
}

func TestSettleIsFencedByLease(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		insert(t, db, st, newMsg("t.x", "a"), newMsg("t.x", ""))
		parts := acquireAll(t, st, "old")
		rows, err := st.Read(ctx, parts, 10)
		if err != nil || len(rows) != 2 {
			t.Fatal(err, len(rows))
		}
		// The lease lapses and another relay takes over.
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_leases SET expires_at = ? WHERE owner = 'old'"), expired(db.Dialect))
		leases, err := st.Acquire(ctx, "new", parts, time.Minute)
		if err != nil || len(leases) != len(parts) {
			t.Fatalf("takeover: %v %d", err, len(leases))
		}
		if !leases[0].Taken {
			t.Error("lease taken from an expired owner is not reported as taken")
		}
		n, err := st.Settle(ctx, "old", []store.Outcome{{ID: rows[0].ID, Status: store.StatusSent, CountAttempt: true}})
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("a stale owner settled %d rows", n)
		}
		if c := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending'"); c != 2 {
			t.Fatalf("%d pending, want 2", c)
		}
		if renewed, err := st.Renew(ctx, "new", time.Hour); err != nil || renewed != int64(len(parts)) {
			t.Fatalf("owner renewed %d of %d leases: %v", renewed, len(parts), err)
		}
		if c := db.Count(t, testdb.Placeholder(db.Dialect, "SELECT count(*) FROM outbox_leases WHERE owner = 'new' AND expires_at > ?"), later(db.Dialect, 50*time.Minute)); c != len(parts) {
			t.Fatalf("%d leases extended by the renewal, want %d", c, len(parts))
		}
		if renewed, _ := st.Renew(ctx, "old", time.Minute); renewed != 0 {
			t.Fatalf("stale owner renewed %d leases", renewed)
		}
		// A clean release hands partitions over without suspicion.
		if err := st.Release(ctx, "new", parts); err != nil {
			t.Fatal(err)
		}
		leases, _ = st.Acquire(ctx, "third", parts, time.Minute)
		for _, l := range leases {
			if l.Taken || l.InflightMaxID != 0 {
				t.Fatalf("released partition looks taken over: %+v", l)
			}
		}
	})
}

func later(d store.Dialect, after time.Duration) any {
	t := time.Now().UTC().Add(after)
	if d == store.SQLite {
		return t.Format("2006-01-02 15:04:05.000")
	}
	if d == store.MySQL {
		return t.Format("2006-01-02 15:04:05.000000")
	}
	return t
}

func expired(d store.Dialect) any {
	if d == store.SQLite {
		return "2000-01-01 00:00:00.000"
	}
	return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
}

func TestInflightMarkSurvivesCrashTakeover(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		parts := acquireAll(t, st, "old")
		n := min(3, len(parts)) // SQLite has one partition
		if err := st.MarkInflight(ctx, "old", parts[:n], []int64{1234, 77, 9}[:n]); err != nil {
			t.Fatal(err)
		}
		// A later round overwrites every mark it is given: 0 where it
		// publishes nothing.
		want := []int64{1234, 0, 10}
		later, ids := parts[1:n], []int64{0, 10}
		if n == 1 {
			want, later, ids = []int64{10}, parts[:1], []int64{10}
		}
		if err := st.MarkInflight(ctx, "old", later, ids); err != nil {
			t.Fatal(err)
		}
		// Another relay's marks are not written.
		if err := st.MarkInflight(ctx, "other", parts[:1], []int64{5}); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkInflight(ctx, "old", parts[:1], nil); err == nil {
			t.Fatal("MarkInflight accepted parts and ids of different lengths")
		}
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_leases SET expires_at = ? WHERE owner = 'old'"), expired(db.Dialect))
		leases, err := st.Acquire(ctx, "new", parts[:n], time.Minute)
		if err != nil || len(leases) != n {
			t.Fatal(err, leases)
		}
		for i, l := range leases {
			if !l.Taken || l.Partition != parts[i] || l.InflightMaxID != want[i] {
				t.Fatalf("lease %d after crash takeover: %+v, want mark %d", i, l, want[i])
			}
		}
	})
}

// TestHeartbeatListsTheLive: a heartbeat lists the relay it registers,
// on its first heartbeat and later ones, and not relays last seen longer
// than ttl ago.
func TestHeartbeatListsTheLive(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		if _, err := st.Heartbeat(ctx, "old", "[]", time.Minute); err != nil {
			t.Fatal(err)
		}
		db.Exec(t, "UPDATE outbox_relays SET seen_at = '2000-01-01 00:00:00'")
		for range 2 {
			live, err := st.Heartbeat(ctx, "new", "[]", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(relayIDs(live), ",") != "new" {
				t.Fatalf("live = %v, want new alone", live)
			}
		}
		live, err := st.Heartbeat(ctx, "old", "[]", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(relayIDs(live), ",") != "new,old" {
			t.Fatalf("live = %v, want new,old", live)
		}
	})
}

func TestHeartbeatAndPartitions(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		for _, id := range []string{"b", "a", "c"} {
			if _, err := st.Heartbeat(ctx, id, "[]", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		live, err := st.Heartbeat(ctx, "a", "[]", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(relayIDs(live), ",") != "a,b,c" {
			t.Fatalf("live = %v", live)
		}
		if err := st.DropRelay(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		live, _ = st.Heartbeat(ctx, "a", "[]", time.Minute)
		if strings.Join(relayIDs(live), ",") != "a,c" {
			t.Fatalf("after drop live = %v", live)
		}
		n, _ := st.Partitions(ctx)
		want := 64
		if db.Dialect == store.SQLite {
			want = 1
		}
		if n != want {
			t.Fatalf("%d partitions, want %d", n, want)
		}
	})
}

func TestPartitionIsStableForKey(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		var in []store.NewMessage
		for i := 0; i < 50; i++ {
			in = append(in, newMsg("t.x", fmt.Sprintf("key-%d", i%5)))
		}
		insert(t, db, st, in...)
		n := db.Count(t, "SELECT count(*) FROM (SELECT business_key FROM outbox_messages GROUP BY business_key HAVING count(DISTINCT partition_no) > 1) AS x")
		if n != 0 {
			t.Fatalf("%d keys span several partitions", n)
		}
		spread := db.Count(t, "SELECT count(DISTINCT partition_no) FROM outbox_messages")
		if db.Dialect != store.SQLite && spread < 2 {
			t.Fatalf("5 keys all in one partition")
		}
	})
}

func TestStatsListRequeueDiscard(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		in := []store.NewMessage{newMsg("a.one", ""), newMsg("a.one", ""), newMsg("b.two", "k"), newMsg("b.two", "")}
		insert(t, db, st, in...)
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET status = 'dead', last_error = 'boom', attempts = 3 WHERE message_id IN (?, ?, ?)"), in[0].MessageID, in[2].MessageID, in[3].MessageID)
		s, err := st.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Pending != 1 || s.Dead != 3 || s.Sent != 0 {
			t.Fatalf("stats %+v", s)
		}
		if s.OldestPendingAge < 0 || s.OldestPendingAge > time.Minute {
			t.Fatalf("oldest pending age %v", s.OldestPendingAge)
		}
		dead, err := st.List(ctx, store.Filter{Status: "dead", Topic: "b.two"})
		if err != nil || len(dead) != 2 || dead[0].LastError != "boom" || dead[0].Key != "k" {
			t.Fatalf("list dead b.two: %v %+v", err, dead)
		}
		n, err := st.Requeue(ctx, store.Filter{MessageIDs: []string{in[2].MessageID, in[1].MessageID}})
		if err != nil || n != 1 { // in[1] is pending, not dead
			t.Fatalf("requeue: %v %d", err, n)
		}
		n, err = st.Discard(ctx, store.Filter{Topic: "a.one"})
		if err != nil || n != 1 {
			t.Fatalf("discard: %v %d", err, n)
		}
		s, _ = st.Stats(ctx)
		if s.Pending != 2 || s.Dead != 1 {
			t.Fatalf("after requeue/discard %+v", s)
		}
		ms, _ := st.List(ctx, store.Filter{MessageIDs: []string{in[2].MessageID}})
		if ms[0].Attempts != 0 || ms[0].Status != "pending" {
			t.Fatalf("requeued row %+v", ms[0])
		}
	})
}

// TestInsertDuplicateAndDelays runs twice: every message in its own
// Insert (the one-row statement) and all in one (the batch statement).
func TestInsertDuplicateAndDelays(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		for _, oneByOne := range []bool{true, false} {
			db.Exec(t, "DELETE FROM outbox_messages")
			put := func(msgs ...store.NewMessage) {
				if !oneByOne {
					insert(t, db, st, msgs...)
					return
				}
				for _, m := range msgs {
					insert(t, db, st, m)
				}
			}
			ctx := context.Background()
			a := newMsg("t.x", "")
			put(a)
			tx, err := db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			dupCall := []store.NewMessage{a}
			if !oneByOne {
				dupCall = []store.NewMessage{newMsg("t.other", ""), a}
			}
			err = st.Insert(ctx, db.Std.UnwrapExecutor(tx), dupCall)
			if dup, ok := err.(*store.DuplicateError); !ok || !slices.Contains(dup.MessageIDs, a.MessageID) {
				t.Fatalf("one by one %v: duplicate insert: %v", oneByOne, err)
			}
			// The refused duplicate leaves the transaction usable.
			after := newMsg("t.after", "")
			if err := st.Insert(ctx, db.Std.UnwrapExecutor(tx), []store.NewMessage{after}); err != nil {
				t.Fatalf("one by one %v: insert after a duplicate: %v", oneByOne, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 't.after'"); n != 1 {
				t.Fatalf("one by one %v: %d rows of the message enqueued after a duplicate", oneByOne, n)
			}
			db.Exec(t, "DELETE FROM outbox_messages WHERE topic IN ('t.after', 't.other')")
			if oneByOne {
				// An id marked fresh skips the conflict check; were it ever
				// taken, the insert still fails as a duplicate.
				reused := a
				reused.FreshID = true
				tx, err := db.SQL.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				err = st.Insert(ctx, db.Std.UnwrapExecutor(tx), []store.NewMessage{reused})
				_ = tx.Rollback()
				if dup, ok := err.(*store.DuplicateError); !ok || !slices.Contains(dup.MessageIDs, a.MessageID) {
					t.Fatalf("fresh id already taken: %v", err)
				}
			}
			later := newMsg("t.later", "")
			later.Delay = time.Hour
			nb := newMsg("t.nb", "")
			nb.NotBefore = time.Now().Add(2 * time.Hour)
			big := newMsg("t.big", "k")
			big.Payload = `"` + strings.Repeat("x", 5<<20) + `"`
			big.MaxAttempts = 3
			// One by one, these take the fresh-id statement.
			later.FreshID, nb.FreshID, big.FreshID = oneByOne, oneByOne, oneByOne
			put(later, nb, big)
			parts := acquireAll(t, st, "r")
			rows, err := st.Read(ctx, parts, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2 || rows[1].MaxAttempts != 3 || len(rows[1].Payload) != len(big.Payload) || rows[1].Key != "k" || !rows[1].HasKey || rows[0].HasKey || rows[0].MaxAttempts != 10 {
				t.Fatalf("one by one %v: ready rows: %+v", oneByOne, rows)
			}
			ms, _ := st.List(ctx, store.Filter{MessageIDs: []string{nb.MessageID, later.MessageID}})
			if len(ms) != 2 {
				t.Fatalf("one by one %v: %d delayed rows", oneByOne, len(ms))
			}
			for _, m := range ms {
				want := time.Hour
				if m.MessageID == nb.MessageID {
					want = 2 * time.Hour
				}
				if d := time.Until(m.AvailableAt); d < want-time.Minute || d > want+time.Minute {
					t.Errorf("one by one %v: %s available in %v, want ~%v", oneByOne, m.Topic, d, want)
				}
			}
			var headers map[string]string
			if err := json.Unmarshal([]byte(rows[0].Headers), &headers); err != nil || headers["content-type"] != "application/json" {
				t.Fatalf("headers %q: %v", rows[0].Headers, err)
			}
			if err := st.Release(ctx, "r", parts); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestRouteHealth: a relay's view of a route is recorded on each change,
// listed while the relay is alive, and forgotten when it stops.
func TestRouteHealth(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		for _, id := range []string{"r1", "r2"} {
			if _, err := st.Heartbeat(ctx, id, "[]", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			relay, route string
			down         bool
			reason       string
		}{
			{"r1", "orders", true, "503 Service Unavailable"},
			{"r2", "orders", true, "503 Service Unavailable"},
			{"r1", "orders", false, ""},
			{"r1", "billing", true, "connection refused"},
			{"ghost", "orders", true, "a relay that is not alive"},
		}
		for _, s := range steps {
			if err := st.RecordRoute(ctx, s.relay, s.route, s.down, s.reason); err != nil {
				t.Fatal(err)
			}
		}
		got, err := st.RouteHealth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, h := range got {
			if h.For < 0 || h.For > time.Minute {
				t.Errorf("%+v: For out of range", h)
			}
			lines = append(lines, h.Route+" "+h.Relay+" "+h.State+" "+h.Reason)
		}
		want := "billing r1 down connection refused|orders r1 up |orders r2 down 503 Service Unavailable"
		if strings.Join(lines, "|") != want {
			t.Fatalf("route health:\n%s\nwant\n%s", strings.Join(lines, "|"), want)
		}
		if err := st.DropRelay(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.RouteHealth(ctx); len(got) != 1 || got[0].Relay != "r2" {
			t.Fatalf("after r1 stopped: %+v", got)
		}
	})
}

func TestSummarizeRoutes(t *testing.T) {
	views := []store.RouteHealth{
		{Route: "billing", Relay: "a", State: store.RouteUp, For: 3 * time.Second},
		{Route: "billing", Relay: "b", State: store.RouteUp, For: time.Second},
		{Route: "orders", Relay: "a", State: store.RouteUp, For: time.Second},
		{Route: "orders", Relay: "b", State: store.RouteDown, For: time.Minute, Reason: "503"},
		{Route: "orders", Relay: "c", State: store.RouteDown, For: time.Hour, Reason: "refused"},
	}
	got := fmt.Sprint(store.SummarizeRoutes(views))
	want := "[{billing a,b up 1s } {orders b,c down 1h0m0s refused}]"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// relayIDs are the ids of relays, in order.
func relayIDs(relays []store.Relay) []string {
	ids := make([]string, len(relays))
	for i, r := range relays {
		ids[i] = r.ID
	}
	return ids
}

// TestSuspectsLeft: a partition whose takeover mark still covers a
// pending row is reported; one whose rows up to the mark are all settled,
// or whose pending rows are all above it, is not.
func TestSuspectsLeft(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		insert(t, db, st, newMsg("t.a", "k1"), newMsg("t.a", "k1"), newMsg("t.a", "k2"))
		var ids []int64
		var parts []int
		rows, err := db.SQL.QueryContext(ctx, "SELECT id, partition_no FROM outbox_messages ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			var p int
			if err := rows.Scan(&id, &p); err != nil {
				t.Fatal(err)
			}
			ids, parts = append(ids, id), append(parts, p)
		}
		if err := rows.Err(); err != nil || len(ids) != 3 {
			t.Fatalf("%d rows: %v", len(ids), err)
		}
		rows.Close()
		// k1's two rows: the mark covers the first only. k2's row is
		// above its partition's mark (when k2 lands elsewhere).
		marks := map[int]int64{parts[0]: ids[0]}
		if parts[2] != parts[0] {
			marks[parts[2]] = ids[2] - 1
		}
		left, err := st.SuspectsLeft(ctx, marks)
		if err != nil || !slices.Equal(left, []int{parts[0]}) {
			t.Fatalf("suspects left %v, %v; want partition %d only", left, err, parts[0])
		}
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET status = 'sent' WHERE id = ?"), ids[0])
		if left, err := st.SuspectsLeft(ctx, marks); err != nil || len(left) != 0 {
			t.Fatalf("after the suspect was sent: %v, %v; want none", left, err)
		}
	})
}
