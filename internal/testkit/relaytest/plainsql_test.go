package relaytest_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
)

// recorder is a publisher that accepts every message and keeps the last
// envelope of each message id.
type recorder struct {
	mu  sync.Mutex
	got map[string]outbox.Envelope
}

func newRecorder() *recorder { return &recorder{got: map[string]outbox.Envelope{}} }

func (r *recorder) Publish(_ context.Context, batch []*outbox.Envelope) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range batch {
		c := *e
		c.Headers = maps.Clone(e.Headers)
		c.Payload = append([]byte(nil), e.Payload...)
		r.got[e.ID] = c
	}
	return make([]error, len(batch))
}

func (r *recorder) Close() error { return nil }

func (r *recorder) envelope(id string) (outbox.Envelope, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.got[id]
	return e, ok
}

// seed is the seed of a randomized test: OUTBOX_TEST_SEED when set, else
// the clock; logged so that a failure can be run again.
func seed(t *testing.T) int64 {
	s := time.Now().UnixNano()
	if v := os.Getenv("OUTBOX_TEST_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("OUTBOX_TEST_SEED: %v", err)
		}
	}
	t.Logf("seed %d (OUTBOX_TEST_SEED=%d runs this again)", s, s)
	return s
}

// dropChecks removes the checks schema version 17 puts on the outbox
// table of MySQL and SQLite, as a table created before it, or by a DBA's
// own DDL, may lack them: the relay must not rely on them.
func dropChecks(t *testing.T, db *testdb.DB) {
	switch db.Dialect {
	case store.MySQL:
		db.Exec(t, "ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_headers_object, DROP CONSTRAINT outbox_messages_topic_length, "+
			"DROP CONSTRAINT outbox_messages_attempts_min, DROP CONSTRAINT outbox_messages_max_attempts_min")
	case store.SQLite:
		db.Exec(t, "DROP TRIGGER outbox_messages_insert_check")
		db.Exec(t, "DROP TRIGGER outbox_messages_update_check")
	}
}

// insert writes one row with plain SQL: cols and their values (nil is
// NULL); the columns left out take their defaults.
func insert(db *testdb.DB, table string, cols []string, vals []any) error {
	q := "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	_, err := db.SQL.ExecContext(context.Background(), testdb.Placeholder(db.Dialect, q), vals...)
	return err
}

// pick is one of vs.
func pick[T any](rng *rand.Rand, vs ...T) T { return vs[rng.Intn(len(vs))] }

// oddTimes are created_at values no producer should write, as d takes
// them as text.
func oddTimes(d store.Dialect) []any {
	ts := []any{"1970-01-01 00:00:01", "2000-01-01 00:00:00", "2037-12-31 23:59:59"}
	switch d {
	case store.Postgres:
		ts = append(ts, "infinity", "-infinity", "0001-01-01 00:00:00", "9999-12-31 23:59:59", "200000-01-01 00:00:00", "4713-01-01 00:00:00 BC")
	case store.SQLite:
		ts = append(ts, "garbage", "", "0000-00-00 00:00:00", "9999-12-31 23:59:59", "-0001-01-01 00:00:00", 12345)
	case store.MySQL:
		ts = append(ts, "0000-00-00 00:00:00", "1000-01-01 00:00:00", "9999-12-31 23:59:59")
	}
	return ts
}

// oddMessage is a row of outbox_messages with one to three odd values,
// as a plain-SQL producer in any language could write it.
func oddMessage(rng *rand.Rand, d store.Dialect, i int) (cols []string, vals []any) {
	row := map[string]any{"topic": "odd.created", "business_key": fmt.Sprintf("o-%d", i), "payload": fmt.Sprintf(`{"odd":%d}`, i), "headers": "{}"}
	for range 1 + rng.Intn(3) {
		switch rng.Intn(8) {
		case 0, 1:
			row["headers"] = pick[any](rng, "null", "", " \n", "[]", `[1,"a"]`, "42", `"x"`, "true", "{", nil,
				`{"a":1,"b":true,"c":null,"d":"e"}`, `{"a":{"b":1}}`, `{"a b":"c"}`, `{"outbox-x":"y"}`, "{\"a\":\"\xff\"}",
				`{"traceparent":"garbage"}`, `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"=,=="}`,
				`{"content-type":"\u0000"}`, `{"content-transfer-encoding":"base64"}`, `{"X-Mixed":"1","x-mixed":"2"}`)
		case 2:
			row["topic"] = pick[any](rng, "", strings.Repeat("t", 10000), strings.Repeat("t", 256), "a..b", "odd.\xff", "odd.créé", "a b", "odd.*", "x", nil)
		case 3:
			row["business_key"] = pick[any](rng, nil, "", strings.Repeat("k", 10000), strings.Repeat("k", 256), "k\xff", "k\x00", "ké", "shared")
		case 4:
			row["payload"] = pick[any](rng, "", "\xff\xfe", strings.Repeat("p", 5000), strings.Repeat("p", 70000), "not json", "a\x00b", "%%%", nil)
		case 5:
			row["attempts"] = pick[any](rng, -5, -1<<31, 9, 1000)
			row["max_attempts"] = pick[any](rng, -1, 0, 1, 1<<30)
		case 6:
			row["created_at"] = pick(rng, oddTimes(d)...)
		case 7:
			row["message_id"] = pick[any](rng, "", "not-a-uuid", strings.Repeat("m", 300), "m\n1", "\xff")
		}
	}
	for _, c := range []string{"message_id", "topic", "business_key", "payload", "headers", "attempts", "max_attempts", "created_at"} {
		if v, ok := row[c]; ok {
			cols, vals = append(cols, c), append(vals, v)
		}
	}
	return cols, vals
}

// TestPlainSQLRowsNeverStopTheRelay: random odd rows written with plain
// SQL beside good ones while an embedded relay runs, on every database,
// with the schema's checks and (MySQL, SQLite) without them. The relay
// never panics or stops; every good row is delivered; every odd row the
// database took ends sent (normalized) or dead with a reason; none is
// left pending. Inserts the database refuses are counted.
func TestPlainSQLRowsNeverStopTheRelay(t *testing.T) {
	for _, c := range []struct {
		d         store.Dialect
		unchecked bool
	}{{store.Postgres, false}, {store.MySQL, false}, {store.MySQL, true}, {store.SQLite, false}, {store.SQLite, true}} {
		name := string(c.d)
		if c.unchecked {
			name += "/without-checks"
		}
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			db := testdb.New(t, c.d)
			if c.unchecked {
				dropChecks(t, db)
			}
			rec := newRecorder()
			cfg := relaytest.Config(rec)
			cfg.MaxPayloadBytes = 4096
			relaytest.Start(t, db, cfg)
			const n = 80
			var odd oddRows
			for i := range n {
				if err := insert(db, "outbox_messages", []string{"topic", "business_key", "payload"},
					[]any{"good.created", fmt.Sprintf("g-%d", i%7), fmt.Sprintf(`{"n":%d}`, i)}); err != nil {
					t.Fatalf("good row %d: %v", i, err)
				}
				cols, vals := oddMessage(rng, c.d, i)
				odd.add(insert(db, "outbox_messages", cols, vals))
			}
			odd.log(t)
			relaytest.WaitFor(t, 60*time.Second, "no row pending", func() bool { return relaytest.Count(t, db, "pending") == 0 })
			if got := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 'good.created' AND status = 'sent'"); got != n {
				t.Errorf("%d good rows sent, want %d", got, n)
			}
			for _, id := range db.Strings(t, "SELECT "+textOf(c.d, "message_id")+" FROM outbox_messages WHERE topic = 'good.created'") {
				if _, ok := rec.envelope(id); !ok {
					t.Errorf("good message %s was not delivered", id)
				}
			}
			if got := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead' AND (last_error IS NULL OR last_error = '')"); got != 0 {
				t.Errorf("%d dead rows without a reason", got)
			}
			if got := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status NOT IN ('sent', 'dead')"); got != 0 {
				t.Errorf("%d rows neither sent nor dead", got)
			}
			if testing.Verbose() {
				reasons := db.Strings(t, "SELECT DISTINCT last_error FROM outbox_messages WHERE status = 'dead'")
				t.Logf("dead letters' reasons: %q", reasons)
			}
		})
	}
}

// TestPlainSQLRowsAdoptedTable: the same on an adopted table (the
// Spring profile), which has no checks of the outbox's at all, drained by
// an `outbox relay --adopt` process: the process keeps running, every
// good row arrives and is sent, every odd row is sent or in the table's
// dead state, none is left to deliver.
func TestPlainSQLRowsAdoptedTable(t *testing.T) {
	relaytest.KeepBinary(t)
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			db := testdb.New(t, d)
			adopttest.Create(t, db, "spring")
			h, url := newHooks(t, false, nil)
			p := relaytest.StartRelay(t, db.URL, adoptArgs("spring", url)...)
			now := adopttest.NowSQL(d)
			const n = 60
			var odd oddRows
			for i := range n {
				adopttest.Insert(t, db, "spring", i, 5, "good.created")
				row := map[string]any{"message_id": fmt.Sprintf("odd-%d-%d", i, rng.Int63()), "topic": "odd.created", "tag": "t",
					"business_key": fmt.Sprintf("o-%d", i), "payload": fmt.Sprintf(`{"odd":%d}`, i)}
				for range 1 + rng.Intn(3) {
					switch rng.Intn(6) {
					case 0:
						row["topic"] = pick[any](rng, "", strings.Repeat("t", 10000), "a..b", "odd.\xff", "odd.créé", "odd.*")
					case 1:
						row["tag"] = pick[any](rng, nil, "", "a\nb", "x\x00", strings.Repeat("g", 10000), "\xff")
					case 2:
						row["business_key"] = pick[any](rng, "", strings.Repeat("k", 10000), "k\xff", "shared")
					case 3:
						row["payload"] = pick[any](rng, "", "\xff\xfe", strings.Repeat("p", 1<<20+10), "not json")
					case 4:
						row["message_id"] = pick[any](rng, "", "m\n1", strings.Repeat("m", 300), "\xff")
					case 5:
						row["create_time"] = pick(rng, append(oddTimes(d), nil)...)
					}
				}
				cols := []string{"status", "retry_count", "max_retry"}
				vals := []any{"PENDING", 0, 10}
				for _, c := range []string{"message_id", "topic", "tag", "business_key", "payload", "create_time"} {
					if v, ok := row[c]; ok {
						cols, vals = append(cols, c), append(vals, v)
					}
				}
				// next_retry_time is due now, as the application writes it.
				q := "INSERT INTO t_local_message (" + strings.Join(cols, ", ") + ", next_retry_time) VALUES (" +
					strings.Repeat("?, ", len(cols)) + now + ")"
				_, err := db.SQL.ExecContext(context.Background(), testdb.Placeholder(d, q), vals...)
				odd.add(err)
			}
			odd.log(t)
			relaytest.WaitFor(t, 60*time.Second, "every good row sent", func() bool {
				return db.Count(t, "SELECT count(*) FROM t_local_message WHERE topic = 'good.created' AND status = 'SENT'") == n
			})
			relaytest.WaitFor(t, 60*time.Second, "no row left to deliver", func() bool {
				return db.Count(t, "SELECT count(*) FROM t_local_message WHERE status = 'PENDING' OR status = 'FAILED' AND retry_count < max_retry") == 0
			})
			if got := db.Count(t, "SELECT count(*) FROM t_local_message WHERE status = 'FAILED' AND (error_msg IS NULL OR error_msg = '')"); got != 0 {
				t.Errorf("%d dead rows without a reason", got)
			}
			if got := h.distinct(); got < n {
				t.Errorf("%d distinct messages arrived, want at least the %d good ones", got, n)
			}
			p.Stop(t) // the process is still running and exits 0
		})
	}
}

// textOf is column col as text in d.
func textOf(d store.Dialect, col string) string {
	if d == store.Postgres {
		return col + "::text"
	}
	return col
}

// oneLine is err's text on one line, bounded, for a test's log.
// oddRows counts the odd rows a test writes: those the database took,
// and those it refused, with the first refusals.
type oddRows struct {
	took, refused int
	refusals      []string
}

// add counts a row by err, the error of its INSERT.
func (o *oddRows) add(err error) {
	if err == nil {
		o.took++
		return
	}
	o.refused++
	if len(o.refusals) < 5 {
		o.refusals = append(o.refusals, oneLine(err.Error()))
	}
}

func (o *oddRows) log(t *testing.T) {
	t.Logf("odd rows: %d taken, %d refused by the database (e.g. %q)", o.took, o.refused, o.refusals)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// TestHeadersNullIsNoHeaders: a row whose headers are the JSON null
// (PHP's json_encode(null)) in a table without version 17's checks is
// delivered with no headers of its own, by an embedded relay, where every
// relay used to panic on it.
func TestHeadersNullIsNoHeaders(t *testing.T) {
	for _, d := range []store.Dialect{store.MySQL, store.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			db := testdb.New(t, d)
			dropChecks(t, db)
			db.Exec(t, "INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES ('php.created', 'p1', '{}', 'null')")
			db.Exec(t, "INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES ('php.created', 'p1', '{}', '{\"x\":\"y\"}')")
			db.Exec(t, "INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('php.created', 'p2', '{}')")
			rec := newRecorder()
			relaytest.Start(t, db, relaytest.Config(rec))
			relaytest.WaitFor(t, 30*time.Second, "every row sent", func() bool { return relaytest.Count(t, db, "sent") == 3 })
			id := db.Strings(t, "SELECT "+textOf(d, "message_id")+" FROM outbox_messages WHERE headers = 'null'")[0]
			env, ok := rec.envelope(id)
			if !ok {
				t.Fatal("the row with headers null was not delivered")
			}
			want := map[string]string{publisher.HeaderTopic: "php.created", publisher.HeaderBusinessKey: "p1", publisher.HeaderContentType: publisher.DefaultContentType}
			if !maps.Equal(env.Headers, want) {
				t.Errorf("headers %v, want %v", env.Headers, want)
			}
		})
	}
}

// TestOversizeRowIsDead: a payload over the relay's MaxPayloadBytes is
// dead with its size and the limit in its reason, whether the read left
// it out (far over) or it was read and measured; the rows around it are
// delivered.
func TestOversizeRowIsDead(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			db := testdb.New(t, d)
			for _, size := range []int{10, 5000, 1100, 20} {
				db.Exec(t, testdb.Placeholder(d, "INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('big.created', 'k', ?)"), strings.Repeat("p", size))
			}
			rec := newRecorder()
			cfg := relaytest.Config(rec)
			cfg.MaxPayloadBytes = 1000
			relaytest.Start(t, db, cfg)
			relaytest.WaitFor(t, 30*time.Second, "no row pending", func() bool { return relaytest.Count(t, db, "pending") == 0 })
			reasons := db.Strings(t, "SELECT last_error FROM outbox_messages WHERE status = 'dead' ORDER BY id")
			want := []string{"payload too large: 5000 bytes, limit 1000", "payload too large: 1100 bytes, limit 1000"}
			if strings.Join(reasons, "\n") != strings.Join(want, "\n") {
				t.Errorf("dead letters' reasons %q, want %q", reasons, want)
			}
			if got := relaytest.Count(t, db, "sent"); got != 2 {
				t.Errorf("%d rows sent, want 2", got)
			}
		})
	}
}

// TestRelayProcessHeadersNull: the reported case as an operator meets it,
// `outbox relay` over MariaDB and SQLite tables without version 17's
// checks holding a row written by PHP with headers 'null': the row is
// delivered, and the process keeps running until it is stopped, then
// exits 0.
func TestRelayProcessHeadersNull(t *testing.T) {
	relaytest.KeepBinary(t)
	for _, d := range []store.Dialect{store.MySQL, store.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			db := testdb.New(t, d)
			dropChecks(t, db)
			db.Exec(t, "INSERT INTO outbox_messages (topic,business_key,payload,headers) VALUES ('php.created','p1','{}','null')")
			db.Exec(t, "INSERT INTO outbox_messages (topic,business_key,payload) VALUES ('php.created','p1','{}')")
			h, url := newHooks(t, false, nil)
			p := relaytest.StartRelay(t, db.URL, "--to", url, "--max-poll", "50ms")
			relaytest.WaitFor(t, 30*time.Second, "both rows sent", func() bool { return relaytest.Count(t, db, "sent") == 2 })
			if got := h.distinct(); got != 2 {
				t.Errorf("%d distinct messages arrived, want 2", got)
			}
			p.Stop(t)
		})
	}
}
