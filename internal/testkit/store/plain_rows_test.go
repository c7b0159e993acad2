package store_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// Rows written by plain SQL (schema version 17): what the schema refuses,
// and that no row the schema lets in, or let in before, stalls a read.

// dropSQLiteChecks removes version 17's triggers, so that a test can
// write the rows a table without them may hold (one migrated by a tool
// that skipped them, or rows from before).
func dropSQLiteChecks(t *testing.T, db *testdb.DB) {
	t.Helper()
	db.Exec(t, "DROP TRIGGER outbox_messages_insert_check")
	db.Exec(t, "DROP TRIGGER outbox_messages_update_check")
}

// readAll reads up to 100 rows of every partition as owner, which holds
// them all.
func readAll(t *testing.T, st *store.Store, owner string) []store.Row {
	t.Helper()
	parts := acquireAll(t, st, owner)
	rows, err := st.Read(context.Background(), parts, 100)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return rows
}

func topicsOf(rows []store.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Topic)
	}
	return out
}

func TestSQLiteReadsRowWithBadCreatedAt(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	dropSQLiteChecks(t, db)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, created_at) VALUES ('bad.created', '{}', 'yesterday'), ('bad.created', '{}', '')`)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload) VALUES ('good', '{}')`)
	rows := readAll(t, db.Store(), "r1")
	if got := topicsOf(rows); len(got) != 3 || got[2] != "good" {
		t.Fatalf("read %v, want both bad rows and the good one", got)
	}
	if !rows[0].CreatedAt.IsZero() || rows[2].CreatedAt.IsZero() {
		t.Errorf("created times %v, %v: want unknown (zero) for the bad row, set for the good one", rows[0].CreatedAt, rows[2].CreatedAt)
	}
}

func TestSQLiteReadsRowWithBadAvailableAt(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	dropSQLiteChecks(t, db)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, available_at) VALUES
		('garbage', '{}', 'when it is ready'),
		('iso.past', '{}', strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-1 minute')),
		('iso.future', '{}', strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '+1 hour')),
		('number', '{}', 12)`)
	got := topicsOf(readAll(t, db.Store(), "r1"))
	if strings.Join(got, ",") != "garbage,iso.past,number" {
		t.Fatalf("read %v, want garbage, iso.past and number (due), not iso.future", got)
	}
}

func TestSQLiteReadsRowOfAnyPartitionNo(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	dropSQLiteChecks(t, db)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, partition_no) VALUES ('p99', '{}', 99), ('p-1', '{}', -1)`)
	st := db.Store()
	rows := readAll(t, st, "r1")
	if len(rows) != 2 || rows[0].Partition != 0 || rows[1].Partition != 0 {
		t.Fatalf("read %+v, want both rows, of partition 0", rows)
	}
	outs := []store.Outcome{{ID: rows[0].ID, Status: store.StatusSent, CountAttempt: true}, {ID: rows[1].ID, Status: store.StatusSent, CountAttempt: true}}
	if n, err := st.Settle(context.Background(), "r1", outs); err != nil || n != 2 {
		t.Fatalf("settle = %d, %v; want both rows settled under partition 0's lease", n, err)
	}
}

func TestSQLiteRefusesBadRows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	for _, c := range []struct{ columns, values, want string }{
		{"headers", "'null'", "headers must be a JSON object"},
		{"headers", "'[]'", "headers must be a JSON object"},
		{"headers", "'5'", "headers must be a JSON object"},
		{"headers", "'{'", "headers must be a JSON object"},
		{"attempts", "-1", "attempts must be an integer of 0 or more"},
		{"max_attempts", "0", "max_attempts must be an integer of 1 or more"},
		{"partition_no", "99", "partition_no must be 0"},
		{"available_at", "'soon'", "available_at must be a time"},
		{"created_at", "''", "created_at must be a time"},
	} {
		_, err := db.SQL.Exec(`INSERT INTO outbox_messages (topic, payload, ` + c.columns + `) VALUES ('t', '{}', ` + c.values + `)`)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("insert %s = %s: %v; want an error saying %q", c.columns, c.values, err, c.want)
		}
	}
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers, attempts) VALUES ('t', '{}', '{}', '2')`)
	if _, err := db.SQL.Exec(`UPDATE outbox_messages SET headers = '[]'`); err == nil || !strings.Contains(err.Error(), "headers must be a JSON object") {
		t.Errorf("update to headers '[]': %v; want refused", err)
	}
}

// TestSchemaRefusesHeadersNotAnObject: every database refuses headers
// that are not a JSON object, with an error that names the rule, and
// takes {}.
func TestSchemaRefusesHeadersNotAnObject(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			for _, h := range []string{"null", "[]", "5"} {
				_, err := db.SQL.Exec(testdb.Placeholder(d, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ('t', '{}', ?)`), h)
				if err == nil || !regexp.MustCompile(`headers`).MatchString(err.Error()) {
					t.Errorf("headers %s: %v; want refused, naming headers", h, err)
				}
			}
			db.Exec(t, testdb.Placeholder(d, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ('t', '{}', ?)`), "{}")
		})
	}
}

func TestMySQLRefusesBadRows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.MySQL)
	for _, c := range []struct{ column, value, constraint string }{
		{"topic", "''", "outbox_messages_topic_length"},
		{"attempts", "-1", "outbox_messages_attempts_min"},
		{"max_attempts", "0", "outbox_messages_max_attempts_min"},
		{"status", "'PENDING'", "outbox_messages_status_known"},
	} {
		cols, vals := "topic, payload, "+c.column, "'t', '{}', "+c.value
		if c.column == "topic" {
			cols, vals = "topic, payload", c.value+", '{}'"
		}
		_, err := db.SQL.Exec(`INSERT INTO outbox_messages (` + cols + `) VALUES (` + vals + `)`)
		if err == nil || !strings.Contains(err.Error(), c.constraint) {
			t.Errorf("%s = %s: %v; want refused by %s", c.column, c.value, err, c.constraint)
		}
	}
}

// downTo16 undoes the versions above 16 with their down migrations,
// newest first, as a migration tool steps back, and returns the newest
// version.
func downTo16(t *testing.T, db *testdb.DB) int {
	t.Helper()
	ms, err := store.Migrations(db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(ms) - 1; i >= 0 && ms[i].Version > 16; i-- {
		for _, stmt := range store.SplitStatements(ms[i].Down) {
			db.Exec(t, stmt)
		}
		db.Exec(t, "DELETE FROM outbox_schema_migrations WHERE version = "+strconv.Itoa(ms[i].Version))
	}
	return ms[len(ms)-1].Version
}

// statusErr is topic → status and last_error of every row.
func statusErr(t *testing.T, db *testdb.DB) map[string]string {
	t.Helper()
	ms, err := db.Store().List(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ms {
		out[m.Topic] = m.Status + " " + m.LastError
		if m.Headers != "{}" && !strings.HasPrefix(m.Headers, `{"`) {
			t.Errorf("%s: headers %q after the migration", m.Topic, m.Headers)
		}
	}
	return out
}

// TestMigrateTo17WithBadRows: a table at version 16 holding the rows
// version 17 refuses migrates; NULL-like headers become {}, other headers
// that are not an object make a pending row dead, numbers out of range
// are brought in, and the pending rows left are read.
func TestMigrateTo17WithBadRows(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			newest := downTo16(t, db)
			// PostgreSQL's schema refused these rows all along.
			db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ('good', '{}', '{"a":"b"}')`)
			want := map[string]string{"good": "pending "}
			if d != store.Postgres {
				db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ('null.headers', '{}', 'null')`)
				want["null.headers"] = "pending "
			}
			switch d {
			case store.MySQL:
				db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers, attempts, max_attempts, status) VALUES
					('array.headers', '{}', '[]', 0, 10, 'pending'),
					('number.headers', '{}', '5', 0, 10, 'pending'),
					('empty.headers', '{}', '', -2, 0, 'pending'),
					('sent.array', '{}', '[1]', 1, 10, 'sent'),
					('upper', '{}', '{}', 0, 10, 'PENDING'),
					('odd.status', '{}', '{}', 0, 10, 'paused'),
					('', '{}', '{}', 0, 10, 'pending')`)
				want["array.headers"] = "dead headers are not a JSON object: []"
				want["number.headers"] = "dead headers are not a JSON object: 5"
				want["empty.headers"] = "pending "
				want["sent.array"] = "sent "
				want["upper"] = "pending "
				want["odd.status"] = "dead unknown status: paused"
				want["(empty)"] = "dead topic is empty"
			case store.SQLite:
				db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers, attempts, max_attempts, partition_no, available_at, created_at) VALUES
					('array.headers', '{}', '[]', 0, 10, 0, '2020-01-01 00:00:00', '2020-01-01 00:00:00'),
					('text.attempts', '{}', '{}', 'abc', -1, 99, '2020-01-01 00:00:00', '2020-01-01 00:00:00'),
					('bad.times', '{}', '{}', 0, 10, 0, 'soon', 'once')`)
				want["array.headers"] = "dead headers are not a JSON object: []"
				want["text.attempts"] = "pending "
				want["bad.times"] = "pending "
			}
			testdb.Migrate(t, db)
			if v, err := store.SchemaVersion(context.Background(), db.Store().DB()); err != nil || v != newest {
				t.Fatalf("schema version %d, %v after the migration; want %d", v, err, newest)
			}
			got := statusErr(t, db)
			for topic, w := range want {
				if got[topic] != w {
					t.Errorf("%s: %q after the migration, want %q", topic, got[topic], w)
				}
			}
			var pending []string
			for topic, w := range want {
				if strings.HasPrefix(w, "pending") {
					pending = append(pending, topic)
				}
			}
			rows := readAll(t, db.Store(), "r1")
			if len(rows) != len(pending) {
				t.Errorf("read %v after the migration, want the pending %v", topicsOf(rows), pending)
			}
			for _, r := range rows {
				if r.Attempts < 0 || r.MaxAttempts < 1 || r.Partition < 0 {
					t.Errorf("%s read with attempts %d of %d, partition %d", r.Topic, r.Attempts, r.MaxAttempts, r.Partition)
				}
			}
		})
	}
}

func TestMySQLGeneratesVersion4MessageIDs(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.MySQL)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload)
		WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 1000) SELECT 'order.created', '{}' FROM seq`)
	ids := db.Strings(t, "SELECT message_id FROM outbox_messages")
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for _, id := range ids {
		if !v4.MatchString(id) {
			t.Fatalf("message_id %q is not a lowercase version 4 UUID", id)
		}
		seen[id] = true
	}
	if len(ids) != 1000 || len(seen) != 1000 {
		t.Fatalf("%d ids, %d distinct; want 1000 of each", len(ids), len(seen))
	}
}

func TestMySQLReadsZeroDates(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.MySQL)
	if _, err := db.SQL.Exec(`INSERT INTO outbox_messages (topic, payload, created_at, available_at) VALUES ('zero', '{}', '0000-00-00 00:00:00', '0000-00-00 00:00:00')`); err != nil {
		testdb.Unavailable(t, "a MySQL server whose sql_mode lets zero dates in", err)
	}
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload) VALUES ('good', '{}')`)
	rows := readAll(t, db.Store(), "r1")
	if len(rows) != 2 || !rows[0].CreatedAt.IsZero() || rows[1].CreatedAt.IsZero() {
		t.Fatalf("read %+v; want the zero-date row (created unknown) and the good one", rows)
	}
}

// TestReadLeavesOutOversizePayloads: with a limit of 1 KiB, a read loads
// payloads up to the base64 form of 1 KiB (1,368 bytes) and leaves longer
// ones out, counting bytes, not characters; every row says its length.
// The plain read, the read that marks, and on PostgreSQL the combined
// settle and read.
func TestReadLeavesOutOversizePayloads(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		st = st.WithPayloadLimit(1024)
		big := strings.Repeat("x", 64<<10)
		wide := strings.Repeat("é", 1000) // 1,000 characters, 2,000 bytes
		within := strings.Repeat("y", 1368)
		want := map[string]struct {
			payload string
			bytes   int64
			over    bool
		}{
			"big": {"", 64 << 10, true}, "wide": {"", 2000, true}, "within": {within, 1368, false}, "small": {"{}", 2, false},
		}
		insert(t, db, st,
			store.NewMessage{MessageID: newMsg("", "").MessageID, Topic: "big", Payload: big, Headers: "{}"},
			store.NewMessage{MessageID: newMsg("", "").MessageID, Topic: "wide", Payload: wide, Headers: "{}"},
			store.NewMessage{MessageID: newMsg("", "").MessageID, Topic: "within", Payload: within, Headers: "{}"},
			store.NewMessage{MessageID: newMsg("", "").MessageID, Topic: "small", Payload: "{}", Headers: "{}"})
		parts := acquireAll(t, st, "r1")
		check := func(how string, rows []store.Row) {
			t.Helper()
			if len(rows) != 4 {
				t.Fatalf("%s read %v, want all four rows", how, topicsOf(rows))
			}
			for _, r := range rows {
				w := want[r.Topic]
				if r.Payload != w.payload || r.PayloadBytes != w.bytes || r.Oversize != w.over {
					t.Errorf("%s: %s: payload %d bytes, PayloadBytes %d, Oversize %v; want %d, %d, %v",
						how, r.Topic, len(r.Payload), r.PayloadBytes, r.Oversize, len(w.payload), w.bytes, w.over)
				}
			}
		}
		rows, err := st.Read(ctx, parts, 10)
		if err != nil {
			t.Fatal(err)
		}
		check("Read", rows)
		if rows, err = st.ReadMark(ctx, "r1", parts, 10); err != nil {
			t.Fatal(err)
		}
		check("ReadMark", rows)
		if st.SettlesWithRead() {
			rows, _, err = st.SettleReadMark(ctx, "r1", nil, parts, 10)
			if err != nil {
				t.Fatal(err)
			}
			check("SettleReadMark", rows)
		}
		// Without a limit, everything is read, and measured.
		if rows, err = db.Store().Read(ctx, parts, 10); err != nil || len(rows) != 4 || rows[0].Payload != big || rows[0].PayloadBytes != 64<<10 || rows[0].Oversize {
			t.Fatalf("read without a limit: %d rows, %v", len(rows), err)
		}
	})
}

// TestReadLeavesOutHugePayloadPostgres: a 150 MB payload is measured, not
// loaded: the read returns its length and no payload.
func TestReadLeavesOutHugePayloadPostgres(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	const size = 150 << 20
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload) VALUES ('huge', repeat('x', $1)), ('small', '{}')`, size)
	st := db.Store().WithPayloadLimit(1 << 20)
	rows := readAll(t, st, "r1")
	if len(rows) != 2 || !rows[0].Oversize || rows[0].Payload != "" || rows[0].PayloadBytes != size || rows[1].Payload != "{}" {
		t.Fatalf("read %d rows: first Oversize %v, %d payload bytes, PayloadBytes %d", len(rows), rows[0].Oversize, len(rows[0].Payload), rows[0].PayloadBytes)
	}
}

// TestDeadSettleRecordsTimeOfDeath: a settle that makes a row dead sets
// its available_at to the database's now, the time of death, not the
// time its last attempt fell due.
func TestDeadSettleRecordsTimeOfDeath(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		d := db.Dialect
		db.Exec(t, `INSERT INTO outbox_messages (topic, payload, available_at) VALUES ('a', '{}', `+testdb.Ago(d, 2*time.Hour)+`), ('b', '{}', `+testdb.Ago(d, 2*time.Hour)+`)`)
		parts := acquireAll(t, st, "r1")
		rows, err := st.Read(ctx, parts, 10)
		if err != nil || len(rows) != 2 {
			t.Fatalf("read %d rows, %v", len(rows), err)
		}
		if _, err := st.Settle(ctx, "r1", []store.Outcome{{ID: rows[0].ID, Status: store.StatusDead, Error: "gone", CountAttempt: true, Partition: rows[0].Partition}}); err != nil {
			t.Fatal(err)
		}
		if st.SettlesWithRead() {
			if _, _, err := st.SettleReadMark(ctx, "r1", []store.Outcome{{ID: rows[1].ID, Status: store.StatusDead, Error: "gone", CountAttempt: true, Partition: rows[1].Partition}}, parts, 10); err != nil {
				t.Fatal(err)
			}
		} else if _, err := st.Settle(ctx, "r1", []store.Outcome{{ID: rows[1].ID, Status: store.StatusDead, Error: "gone", CountAttempt: true, Partition: rows[1].Partition}}); err != nil {
			t.Fatal(err)
		}
		now, err := st.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := st.List(ctx, store.Filter{Status: store.StatusDead})
		if err != nil || len(ms) != 2 {
			t.Fatalf("%d dead rows, %v", len(ms), err)
		}
		for _, m := range ms {
			if age := now.Sub(m.AvailableAt); age < 0 || age > time.Hour {
				t.Errorf("%s: available_at %v is not the time it died (database now %v)", m.Topic, m.AvailableAt, now)
			}
		}
	})
}
