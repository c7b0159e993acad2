package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// aged is a row inserted with a chosen status and timestamps, given as
// ages (negative: in the future).
type aged struct {
	name                     string
	status                   string
	created, available, sent time.Duration
	noSentAt, due            bool
}

func insertAged(t *testing.T, db *testdb.DB, rows []aged) map[string]int64 {
	t.Helper()
	ids := map[string]int64{}
	for _, r := range rows {
		sent := "NULL"
		if !r.noSentAt && r.status != "pending" && r.status != "dead" && r.status != "expired" {
			sent = testdb.Ago(db.Dialect, r.sent)
		}
		consumed := "NULL"
		if r.status == "consumed" {
			consumed = testdb.Ago(db.Dialect, r.sent)
		}
		db.Exec(t, fmt.Sprintf(`INSERT INTO outbox_messages (topic, business_key, payload, status, created_at, available_at, sent_at, consumed_at, last_error)
VALUES ('t.%s', 'k', '{"row":"%s"}', '%s', %s, %s, %s, %s, 'e')`, r.name, r.name, r.status,
			testdb.Ago(db.Dialect, r.created), testdb.Ago(db.Dialect, r.available), sent, consumed))
		ids[r.name] = int64(db.Count(t, "SELECT max(id) FROM outbox_messages"))
	}
	return ids
}

// retentionRows cover every rule with Sent = 1h and Dead = 4h.
var retentionRows = []aged{
	{name: "sent_old", status: "sent", created: 3 * time.Hour, available: 3 * time.Hour, sent: 3 * time.Hour, due: true},
	{name: "consumed_old", status: "consumed", created: 3 * time.Hour, available: 3 * time.Hour, sent: 2 * time.Hour, due: true},
	{name: "sent_late", status: "sent", created: 5 * time.Hour, available: 40 * time.Minute, sent: 30 * time.Minute},
	{name: "pending_old", status: "pending", created: 10 * time.Hour, available: 10 * time.Hour},
	{name: "pending_delayed", status: "pending", created: 10 * time.Hour, available: -24 * time.Hour},
	{name: "dead_old", status: "dead", created: 5 * time.Hour, available: 5 * time.Hour, due: true},
	{name: "dead_retried", status: "dead", created: 5 * time.Hour, available: time.Hour},
	{name: "dead_young", status: "dead", created: 2 * time.Hour, available: 2 * time.Hour},
	{name: "sent_no_sent_at", status: "sent", created: 2 * time.Hour, available: 2 * time.Hour, noSentAt: true, due: true},
	{name: "sent_recent", status: "sent", created: time.Minute, available: time.Minute, sent: time.Minute},
	{name: "pending_recent", status: "pending", created: 0, available: 0},
}

var oneHourFourHours = store.RetentionPolicy{Sent: time.Hour, Dead: 4 * time.Hour}

// sweep calls Retain in windows of limit rows until the end of the table.
func sweep(t *testing.T, st *store.Store, limit int, p store.RetentionPolicy) (removed int64, batches []store.RetentionBatch) {
	t.Helper()
	var after int64
	for {
		b, err := st.Retain(context.Background(), after, limit, p)
		if err != nil {
			t.Fatalf("retain after %d: %v", after, err)
		}
		batches = append(batches, b)
		removed += b.Removed
		if b.Scanned < limit {
			return removed, batches
		}
		after = b.LastID
	}
}

func remainingTopics(t *testing.T, db *testdb.DB, table string) []string {
	t.Helper()
	var out []string
	for _, s := range db.Strings(t, "SELECT topic FROM "+table+" ORDER BY id") {
		out = append(out, s[len("t."):])
	}
	return out
}

func TestRetainRemovesOnlyDueRows(t *testing.T) {
	for _, archive := range []bool{false, true} {
		t.Run(fmt.Sprintf("archive=%v", archive), func(t *testing.T) {
			conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
				ids := insertAged(t, db, retentionRows)
				p := oneHourFourHours
				p.Archive = archive
				removed, batches := sweep(t, st, 3, p)
				var due, kept []string
				for _, r := range retentionRows {
					if r.due {
						due = append(due, r.name)
					} else {
						kept = append(kept, r.name)
					}
				}
				if removed != int64(len(due)) {
					t.Errorf("removed %d rows, want %d", removed, len(due))
				}
				if got := remainingTopics(t, db, "outbox_messages"); !slices.Equal(got, kept) {
					t.Errorf("left %v, want %v", got, kept)
				}
				if len(batches) != (len(retentionRows)+3)/3 {
					t.Errorf("%d windows of 3 over %d rows", len(batches), len(retentionRows))
				}
				if batches[0].FirstKept != ids["sent_late"] || batches[0].LastID != ids["sent_late"] || batches[1].FirstKept != ids["pending_old"] {
					t.Errorf("first windows: %+v %+v (ids %v)", batches[0], batches[1], ids)
				}
				var young int64
				for _, b := range batches {
					if b.FirstYoung != 0 && young == 0 {
						young = b.FirstYoung
					}
				}
				if young != ids["sent_recent"] {
					t.Errorf("first young row %d, want sent_recent %d", young, ids["sent_recent"])
				}
				archived := db.Count(t, "SELECT count(*) FROM outbox_messages_archive")
				if !archive {
					if archived != 0 {
						t.Errorf("%d rows archived with archiving off", archived)
					}
					return
				}
				if got := remainingTopics(t, db, "outbox_messages_archive"); !slices.Equal(got, due) {
					t.Errorf("archived %v, want %v", got, due)
				}
				// The archived rows keep their ids, message ids and contents.
				if n := db.Count(t, `SELECT count(*) FROM outbox_messages_archive WHERE id = `+strconv.FormatInt(ids["consumed_old"], 10)+
					` AND status = 'consumed' AND payload = '{"row":"consumed_old"}' AND sent_at IS NOT NULL AND consumed_at IS NOT NULL AND last_error = 'e' AND archived_at IS NOT NULL`); n != 1 {
					t.Errorf("consumed_old not archived whole")
				}
				// A second pass finds nothing more and duplicates nothing.
				if again, _ := sweep(t, st, 3, p); again != 0 {
					t.Errorf("second pass removed %d", again)
				}
				if n := db.Count(t, "SELECT count(*) FROM outbox_messages_archive"); n != len(due) {
					t.Errorf("%d archived after a second pass, want %d", n, len(due))
				}
			})
		})
	}
}

// TestRetainExpiredFollowsDead: an expired row goes (or is archived) once
// the dead retention has passed since it expired, counted from
// available_at, which the expiry sets to its time of death; a younger one
// stays, as do pending and sent rows within their retention. A row the
// relay expires now is kept though it was created long ago.
func TestRetainExpiredFollowsDead(t *testing.T) {
	for _, archive := range []bool{false, true} {
		t.Run(fmt.Sprintf("archive=%v", archive), func(t *testing.T) {
			conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
				ids := insertAged(t, db, []aged{
					{name: "expired_old", status: "expired", created: 6 * time.Hour, available: 5 * time.Hour},
					{name: "expired_young", status: "expired", created: 6 * time.Hour, available: 2 * time.Hour},
					{name: "expired_late", status: "expired", created: 6 * time.Hour, available: -time.Hour},
					{name: "dead_old", status: "dead", created: 5 * time.Hour, available: 5 * time.Hour},
					{name: "pending_old", status: "pending", created: 10 * time.Hour, available: 10 * time.Hour},
					{name: "sent_recent", status: "sent", created: time.Minute, available: time.Minute, sent: time.Minute},
				})
				// A pending row created and due long ago whose expiry comes
				// now: the expiry stamps its time of death.
				db.Exec(t, `INSERT INTO outbox_messages (topic, payload, created_at, available_at, expires_at)
VALUES ('t.expiring', '{}', `+testdb.Ago(db.Dialect, 10*time.Hour)+`, `+testdb.Ago(db.Dialect, 10*time.Hour)+`, `+testdb.Ago(db.Dialect, time.Second)+`)`)
				acquireAll(t, st, "r1")
				if n, err := st.Expire(context.Background(), "r1"); err != nil || n != 1 {
					t.Fatalf("expired %d, %v; want 1", n, err)
				}
				p := oneHourFourHours
				p.Archive = archive
				removed, _ := sweep(t, st, 4, p)
				if removed != 2 {
					t.Errorf("removed %d rows, want 2", removed)
				}
				want := []string{"expired_young", "expired_late", "pending_old", "sent_recent", "expiring"}
				if got := remainingTopics(t, db, "outbox_messages"); !slices.Equal(got, want) {
					t.Errorf("left %v, want %v", got, want)
				}
				if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'expired'"); n != 3 {
					t.Errorf("%d expired rows left, want 3", n)
				}
				archived := remainingTopics(t, db, "outbox_messages_archive")
				if !archive {
					if len(archived) != 0 {
						t.Errorf("archived %v with archiving off", archived)
					}
					return
				}
				if !slices.Equal(archived, []string{"expired_old", "dead_old"}) {
					t.Errorf("archived %v, want expired_old dead_old", archived)
				}
				if n := db.Count(t, `SELECT count(*) FROM outbox_messages_archive WHERE id = `+strconv.FormatInt(ids["expired_old"], 10)+
					` AND status = 'expired' AND last_error = 'e' AND sent_at IS NULL`); n != 1 {
					t.Errorf("expired_old not archived whole, under its status")
				}
			})
		})
	}
}

// TestRetainLeavesRowsChangedMeanwhile: a due row requeued or marked
// consumed between the window and the delete is re-checked and stays.
func TestRetainLeavesRowsChangedMeanwhile(t *testing.T) {
	for _, archive := range []bool{false, true} {
		t.Run(fmt.Sprintf("archive=%v", archive), func(t *testing.T) {
			conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
				ids := insertAged(t, db, []aged{
					{name: "dead_a", status: "dead", created: 5 * time.Hour, available: 5 * time.Hour},
					{name: "dead_b", status: "dead", created: 5 * time.Hour, available: 5 * time.Hour},
					{name: "sent_c", status: "sent", created: 5 * time.Hour, available: 5 * time.Hour, sent: 5 * time.Hour},
				})
				store.BeforeRemove(st, func() {
					db.Exec(t, fmt.Sprintf("UPDATE outbox_messages SET status = 'pending' WHERE id = %d", ids["dead_a"]))
					db.Exec(t, fmt.Sprintf("UPDATE outbox_messages SET status = 'consumed', sent_at = %s WHERE id = %d", testdb.Ago(db.Dialect, 0), ids["sent_c"]))
				})
				p := oneHourFourHours
				p.Archive = archive
				b, err := st.Retain(context.Background(), 0, 10, p)
				if err != nil {
					t.Fatal(err)
				}
				if b.Removed != 1 || b.FirstKept != ids["dead_a"] || b.Scanned != 3 {
					t.Fatalf("batch %+v", b)
				}
				if got := remainingTopics(t, db, "outbox_messages"); !slices.Equal(got, []string{"dead_a", "sent_c"}) {
					t.Fatalf("left %v", got)
				}
				if archive {
					if got := remainingTopics(t, db, "outbox_messages_archive"); !slices.Equal(got, []string{"dead_b"}) {
						t.Fatalf("archived %v", got)
					}
				}
			})
		})
	}
}

// bigRows is how many sent rows the read-cost test inserts:
// OUTBOX_TEST_BIG_ROWS, else one million.
func bigRows() int {
	if n, err := strconv.Atoi(os.Getenv("OUTBOX_TEST_BIG_ROWS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// readBuffers runs the relay's read under EXPLAIN (ANALYZE, BUFFERS) and
// returns the shared buffers it touched and the rows it returned.
func readBuffers(t *testing.T, db *testdb.DB) (buffers, rows int) {
	t.Helper()
	parts := make([]int32, 64)
	for i := range parts {
		parts[i] = int32(i)
	}
	var plan string
	// Twice: the first run may set hint bits; the second is what a relay
	// polling the table sees.
	for range 2 {
		plan = explainRead(t, db, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ", parts, 1000)
	}
	var doc []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
			Rows int `json:"Actual Rows"`
		}
	}
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		t.Fatalf("explain output: %v\n%s", err, plan)
	}
	return doc[0].Plan.Hit + doc[0].Plan.Read, doc[0].Plan.Rows
}

func insertBig(t *testing.T, db *testdb.DB, n int, status, age string) {
	t.Helper()
	sentAt := "NULL"
	if status == "sent" {
		sentAt = "t0 + g * interval '1 millisecond'"
	}
	db.Exec(t, fmt.Sprintf(`INSERT INTO outbox_messages (topic, business_key, payload, status, attempts, created_at, available_at, sent_at)
SELECT 'order.created', 'order-' || (g %% 5000), '{"order_id":' || g || ',"note":"`+"%s"+`"}', '%s', %d,
       t0 + g * interval '1 millisecond', t0 + g * interval '1 millisecond', %s
FROM generate_series(1, %d) AS g, (SELECT now() - interval '%s' AS t0) AS c`,
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		status, map[bool]int{true: 1}[status == "sent"], sentAt, n, age))
	db.Exec(t, "ANALYZE outbox_messages")
}

// TestReadCostFlatWithMillionSentRows: the relay's read touches as many
// buffers over a million old sent rows as over none, and retention then
// moves those rows to the archive in batches, leaving pending rows alone.
func TestReadCostFlatWithMillionSentRows(t *testing.T) {
	t.Parallel()
	const pending = 300
	n := bigRows()

	empty := testdb.New(t, store.Postgres)
	insertBig(t, empty, pending, "pending", "1 minute")
	baseBuffers, baseRows := readBuffers(t, empty)

	db := testdb.New(t, store.Postgres)
	start := time.Now()
	insertBig(t, db, n, "sent", "3 days")
	t.Logf("inserted %d sent rows in %v", n, time.Since(start).Round(time.Millisecond))
	insertBig(t, db, 20, "sent", "10 minutes") // recent: kept
	insertBig(t, db, pending, "pending", "1 minute")
	bigBuffers, bigRows := readBuffers(t, db)
	t.Logf("read of %d pending rows: %d buffers beside no sent rows, %d beside %d sent rows", pending, baseBuffers, bigBuffers, n)
	if baseRows != pending || bigRows != pending {
		t.Fatalf("read returned %d and %d rows, want %d", baseRows, bigRows, pending)
	}
	if bigBuffers > 2*baseBuffers+8 {
		t.Fatalf("read over %d sent rows touched %d buffers, over none %d: the cost grows with settled rows", n, bigBuffers, baseBuffers)
	}

	st := db.Store()
	p := store.RetentionPolicy{Sent: 24 * time.Hour, Dead: 14 * 24 * time.Hour, Archive: true}
	start = time.Now()
	removed, batches := sweep(t, st, 5000, p)
	took := time.Since(start)
	t.Logf("retention archived %d rows in %d batches of 5000 in %v (%.0f rows/s)", removed, len(batches), took.Round(time.Millisecond), float64(removed)/took.Seconds())
	if removed != int64(n) {
		t.Fatalf("removed %d rows, want %d", removed, n)
	}
	if c := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE created_at < now() - interval '1 day'"); c != 0 {
		t.Fatalf("%d rows past retention remain", c)
	}
	if c := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending'"); c != pending {
		t.Fatalf("%d pending rows remain, want %d", c, pending)
	}
	if c := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'"); c != 20 {
		t.Fatalf("%d recent sent rows remain, want 20", c)
	}
	if c := db.Count(t, "SELECT count(*) FROM outbox_messages_archive"); c != n {
		t.Fatalf("archive holds %d rows, want %d", c, n)
	}
	afterBuffers, afterRows := readBuffers(t, db)
	t.Logf("read after retention, before vacuum: %d buffers", afterBuffers)
	if afterRows != pending || afterBuffers > 2*baseBuffers+8 {
		t.Fatalf("read after retention: %d rows, %d buffers", afterRows, afterBuffers)
	}
}

// BenchmarkRetain measures retention throughput: one op removes one batch
// of 1000 expired sent rows (reported as rows/s). Run with e.g.
// go test -run '^$' -bench Retain -benchtime 50x ./internal/store/
func BenchmarkRetain(b *testing.B) {
	const batch = 1000
	for _, c := range []struct {
		name string
		d    store.Dialect
	}{{"postgres", store.Postgres}, {"mysql", store.MySQL}, {"sqlite", store.SQLite}} {
		for _, archive := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/archive=%v", c.name, archive), func(b *testing.B) {
				db := testdb.New(b, c.d)
				st := db.Store()
				ctx := context.Background()
				total := b.N * batch
				for from := 0; from < total; from += 5000 {
					var msgs []store.NewMessage
					for i := from; i < min(from+5000, total); i++ {
						m := newMsg("order.created", fmt.Sprintf("order-%d", i%500))
						m.Payload = fmt.Sprintf(`{"order_id":%d,"note":"%0200d"}`, i, i)
						msgs = append(msgs, m)
					}
					if err := st.Insert(ctx, st.DB(), msgs); err != nil {
						b.Fatal(err)
					}
				}
				old := testdb.Ago(c.d, 48*time.Hour)
				db.Exec(b, "UPDATE outbox_messages SET status = 'sent', attempts = 1, created_at = "+old+", available_at = "+old+", sent_at = "+old)
				p := store.RetentionPolicy{Sent: 24 * time.Hour, Dead: 14 * 24 * time.Hour, Archive: archive}
				b.ResetTimer()
				var after, removed int64
				for range b.N {
					r, err := st.Retain(ctx, after, batch, p)
					if err != nil {
						b.Fatal(err)
					}
					after, removed = r.LastID, removed+r.Removed
				}
				b.StopTimer()
				if removed != int64(total) {
					b.Fatalf("removed %d of %d rows", removed, total)
				}
				b.ReportMetric(float64(removed)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// TestRetentionPlansMySQL: every MariaDB/MySQL retention statement finds
// its rows by primary key, whatever the status index offers, so a batch
// costs the same on a table of any size.
func TestRetentionPlansMySQL(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.MySQL)
	insertAged(t, db, retentionRows)
	for range 11 { // 22,528 rows, mostly settled, as the planner should expect
		db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload, status, created_at, available_at, sent_at, consumed_at)
SELECT topic, business_key, payload, status, created_at, available_at, sent_at, consumed_at FROM outbox_messages`)
	}
	db.Exec(t, "ANALYZE TABLE outbox_messages")
	for name, q := range store.RetentionSQL(store.MySQL) {
		var args []any
		if name == "window" {
			args = []any{int64(3600e6), int64(3600e6), int64(3600e6), 0, 100}
		} else {
			args = []any{"[1,2,3]", int64(3600e6), int64(3600e6)}[:map[string]int{"remove": 3, "lock": 3, "archive": 1, "purge": 1}[name]]
		}
		rows, err := db.SQL.Query("EXPLAIN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cols, _ := rows.Columns()
		seen := false
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			row := map[string]string{}
			for i, c := range cols {
				if b, ok := vals[i].([]byte); ok {
					row[c] = string(b)
				} else if vals[i] != nil {
					row[c] = fmt.Sprint(vals[i])
				}
			}
			if row["table"] != "m" && row["table"] != "outbox_messages" {
				continue
			}
			seen = true
			if row["key"] != "PRIMARY" {
				t.Errorf("%s reads outbox_messages by %q (%s), want PRIMARY", name, row["key"], row["type"])
			}
		}
		rows.Close()
		if !seen {
			t.Errorf("%s: no plan row for outbox_messages", name)
		}
	}
}
