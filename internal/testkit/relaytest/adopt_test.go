package relaytest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// hooks is a webhook endpoint that records every delivery; fail decides,
// per request body, whether to answer 500.
type hooks struct {
	fail  func(body string) bool
	keyed bool // check per-key order

	mu     sync.Mutex
	order  relaytest.KeyOrder
	t      *testing.T
	ids    map[string]int
	tags   map[string]string
	total  int
	failed int
}

func newHooks(t *testing.T, keyed bool, fail func(string) bool) (*hooks, string) {
	h := &hooks{fail: fail, keyed: keyed, t: t, ids: map[string]int{}, tags: map[string]string{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL + "/hooks"
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil && h.fail(string(body)) {
		h.failed++
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	id := r.Header.Get("webhook-id")
	h.total++
	h.ids[id]++
	h.tags[id] = r.Header.Get("tag")
	if h.keyed {
		h.order.Check(h.t, id, body)
	}
	w.WriteHeader(http.StatusOK)
}

func (h *hooks) distinct() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

// adopted is a database of dialect d with profile's seed table holding
// n rows of topic, numbered 0 to n-1, over keys business keys
// (adopttest.Insert).
func adopted(t *testing.T, d store.Dialect, profile string, n, keys int, topic string) *testdb.DB {
	t.Helper()
	db := testdb.New(t, d)
	adopttest.Create(t, db, profile)
	for i := range n {
		adopttest.Insert(t, db, profile, i, keys, topic)
	}
	return db
}

// adoptArgs are the relay flags of the adopt tests: short leases, fast
// polls and retries.
func adoptArgs(profile, to string, extra ...string) []string {
	return append([]string{"--adopt", profile, "--to", to, "--lease-ttl", "1s", "--max-poll", "50ms",
		"--retry-base", "20ms", "--retry-cap", "100ms", "--batch-size", "50"}, extra...)
}

// statusCount counts profile's rows in status value v.
func statusCount(t *testing.T, db *testdb.DB, profile, v string) int {
	s := adopttest.Table[profile]
	return db.Count(t, testdb.Placeholder(db.Dialect, "SELECT count(*) FROM "+s.Name+" WHERE "+s.Status+" = ?"), v)
}

// TestAdoptSeedTables: each seed table, created from its DDL on every
// database, rows written the way its article writes them, drained by
// `outbox relay --adopt`: every row arrives (Spring's tag as a header),
// ends in the table's sent status with its retry counter untouched, and
// a row with an empty topic ends in the table's dead state.
func TestAdoptSeedTables(t *testing.T) {
	relaytest.KeepBinary(t)
	for _, d := range testdb.Dialects {
		for _, profile := range []string{"laravel", "spring", "codes"} {
			t.Run(string(d)+"/"+profile, func(t *testing.T) {
				const n = 40
				db := adopted(t, d, profile, n, 5, "order.created")
				adopttest.Insert(t, db, profile, n, 5, "")
				h, url := newHooks(t, profile == "spring", nil)
				p := relaytest.StartRelay(t, db.URL, adoptArgs(profile, url)...)
				s := adopttest.Table[profile]
				relaytest.WaitFor(t, 30*time.Second, "every row sent", func() bool { return statusCount(t, db, profile, s.Sent) == n })
				dead := map[string]string{
					"laravel": "SELECT count(*) FROM local_messages WHERE status = 'failed' AND retry_times >= max_retry_times AND topic = ''",
					"spring":  "SELECT count(*) FROM t_local_message WHERE status = 'FAILED' AND retry_count >= max_retry AND topic = '' AND error_msg LIKE '%topic%'",
					"codes":   "SELECT count(*) FROM local_message WHERE status = 2 AND retry_count >= 10 AND topic = ''",
				}[profile]
				relaytest.WaitFor(t, 10*time.Second, "the row without a topic dead", func() bool { return db.Count(t, dead) == 1 })
				p.Stop(t)
				if got := h.distinct(); got != n {
					t.Errorf("%d distinct messages arrived, want %d", got, n)
				}
				if got := db.Count(t, "SELECT count(*) FROM "+s.Name+" WHERE "+s.Attempts+" <> 0 AND topic <> ''"); got != 0 {
					t.Errorf("%d delivered rows had their retry counter changed", got)
				}
				if profile == "spring" {
					h.mu.Lock()
					for id, tag := range h.tags {
						if tag != "sync-crm" {
							t.Errorf("message %s arrived with tag %q, want sync-crm", id, tag)
						}
					}
					h.mu.Unlock()
				}
			})
		}
	}
}

// deadSQL counts profile's rows in the table's dead state whose payload
// holds mark, with the reason where the table has an error column.
func deadSQL(d store.Dialect, profile, reason string) string {
	switch profile {
	case "laravel":
		payload := "payload"
		if d == store.Postgres {
			payload = "payload::text"
		}
		return "SELECT count(*) FROM local_messages WHERE status = 'failed' AND retry_times = max_retry_times AND " + payload + " LIKE ?"
	case "spring":
		return "SELECT count(*) FROM t_local_message WHERE status = 'FAILED' AND retry_count = max_retry AND payload LIKE ? AND error_msg LIKE '%" + reason + "%'"
	}
	return "SELECT count(*) FROM local_message WHERE status = 2 AND retry_count = 10 AND msg_content LIKE ?"
}

// TestAdoptRetriesUntilDead: a webhook that always fails some messages
// (500) and takes the others. The failures are the messages' own (the
// route keeps delivering the rest), so each failing row is charged
// retry after retry, in the table's vocabulary, until its retries are
// used up and it is in the table's dead state; the rows delivered are
// sent with their counters untouched.
func TestAdoptRetriesUntilDead(t *testing.T) {
	relaytest.KeepBinary(t)
	for _, d := range testdb.Dialects {
		for _, profile := range []string{"laravel", "spring", "codes"} {
			t.Run(string(d)+"/"+profile, func(t *testing.T) {
				t.Parallel()
				const n = 30
				db := adopted(t, d, profile, n, n, "order.created")
				poison := func(body string) bool {
					return strings.Contains(body, `"seq":3}`) || strings.Contains(body, `"seq":13}`)
				}
				h, url := newHooks(t, false, poison)
				p := relaytest.StartRelay(t, db.URL, adoptArgs(profile, url)...)
				s := adopttest.Table[profile]
				relaytest.WaitFor(t, 60*time.Second, "both failing rows dead", func() bool {
					return db.Count(t, testdb.Placeholder(d, deadSQL(d, profile, "500")), `%"seq":%3}`) == 2
				})
				p.Stop(t)
				if got := statusCount(t, db, profile, s.Sent); got != n-2 {
					t.Errorf("%d rows sent, want %d", got, n-2)
				}
				if got := db.Count(t, "SELECT count(*) FROM "+s.Name+" WHERE "+s.Status+" = '"+s.Sent+"' AND "+s.Attempts+" <> 0"); got != 0 {
					t.Errorf("%d sent rows were charged a retry", got)
				}
				want := map[string]int{"laravel": 3, "spring": 10, "codes": 10}[profile]
				h.mu.Lock()
				defer h.mu.Unlock()
				if h.failed != 2*want {
					t.Errorf("the failing rows were attempted %d times, want %d", h.failed, 2*want)
				}
			})
		}
	}
}

// TestAdoptOutageChargesNothing: the destination answers 503 to
// everything for 4 s, then recovers. The route goes down and the rows
// wait; none is charged a retry or goes dead, and every one is sent
// once the destination is back.
func TestAdoptOutageChargesNothing(t *testing.T) {
	relaytest.KeepBinary(t)
	for _, d := range []store.Dialect{store.MySQL, store.Postgres} {
		for _, profile := range []string{"laravel", "spring"} {
			t.Run(string(d)+"/"+profile, func(t *testing.T) {
				t.Parallel()
				// One business key per row, as the Spring article writes
				// them (business_key is the row's own idempotency key).
				const n = 60
				db := adopted(t, d, profile, n, n, "order.created")
				var start time.Time // of the outage: the first request
				h, url := newHooks(t, profile == "spring", func(string) bool {
					if start.IsZero() {
						start = time.Now()
					}
					return time.Since(start) < 4*time.Second
				})
				p := relaytest.StartRelay(t, db.URL, adoptArgs(profile, url)...)
				s := adopttest.Table[profile]
				relaytest.WaitFor(t, 60*time.Second, "every row sent", func() bool { return statusCount(t, db, profile, s.Sent) == n })
				p.Stop(t)
				if got := db.Count(t, "SELECT count(*) FROM "+s.Name+" WHERE "+s.Attempts+" <> 0"); got != 0 {
					t.Errorf("%d rows were charged a retry for the outage", got)
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				if h.failed == 0 {
					t.Error("the destination refused nothing: no outage was tested")
				}
			})
		}
	}
}

// TestAdoptRelaysSIGKILL: three relays under --adopt on one seed table,
// the one holding the table's lease SIGKILLed in the middle of the
// drain, rows written before and after. Another relay takes over; every
// row arrives at least once, under one message id each (the Laravel
// table's derived ids are the same from every relay), every row ends in
// the table's sent status, and the Spring table's keys arrive in order.
func TestAdoptRelaysSIGKILL(t *testing.T) {
	relaytest.KeepBinary(t)
	for _, d := range testdb.Dialects {
		for _, profile := range []string{"spring", "laravel"} {
			t.Run(string(d)+"/"+profile, func(t *testing.T) {
				const first, more = 300, 100
				db := adopted(t, d, profile, first, 20, "user.registered")
				h, url := newHooks(t, profile == "spring", func(string) bool {
					time.Sleep(10 * time.Millisecond)
					return false
				})
				url += "?max_in_flight=2" // a drain of a few seconds
				relays := map[string]*relaytest.Process{}
				for i := range 3 {
					id := fmt.Sprintf("relay-%d", i)
					relays[id] = relaytest.StartRelay(t, db.URL, adoptArgs(profile, url, "--id", id)...)
				}
				relaytest.WaitFor(t, 30*time.Second, "50 rows delivered", func() bool { return h.distinct() >= 50 })
				holder := db.Strings(t, "SELECT owner FROM outbox_adopted_leases WHERE owner IS NOT NULL")
				if len(holder) != 1 || relays[holder[0]] == nil {
					t.Fatalf("lease holders %v, want one of the relays", holder)
				}
				relays[holder[0]].Kill()
				if n := h.distinct(); n >= first {
					t.Fatalf("all %d rows were delivered before the kill: nothing was tested", n)
				}
				delete(relays, holder[0])
				for i := first; i < first+more; i++ {
					adopttest.Insert(t, db, profile, i, 20, "user.registered")
				}
				s := adopttest.Table[profile]
				relaytest.WaitFor(t, 60*time.Second, "every row sent", func() bool {
					return statusCount(t, db, profile, s.Sent) == first+more
				})
				next := db.Strings(t, "SELECT owner FROM outbox_adopted_leases WHERE owner IS NOT NULL")
				if len(next) != 1 || relays[next[0]] == nil {
					t.Errorf("lease holders after the kill %v, want one of the surviving relays", next)
				}
				for _, p := range relays {
					p.Stop(t)
				}
				if got := h.distinct(); got != first+more {
					t.Errorf("%d distinct message ids arrived, want %d", got, first+more)
				}
			})
		}
	}
}

// TestAdoptYAMLMapping: a table of the application's own, mapped by a
// YAML file: a dead status of its own, an error column, a headers column
// and a header column, a fixed topic, no message id column. Rows are
// delivered with their headers, a failing row ends in the mapping's dead
// status with the reason, and a row with headers that are not a JSON
// object goes dead with that reason.
func TestAdoptYAMLMapping(t *testing.T) {
	relaytest.KeepBinary(t)
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			id := "BIGINT AUTO_INCREMENT PRIMARY KEY"
			switch d {
			case store.Postgres:
				id = "BIGSERIAL PRIMARY KEY"
			case store.SQLite:
				id = "INTEGER PRIMARY KEY AUTOINCREMENT"
			}
			db.Exec(t, "CREATE TABLE outgoing_events (id "+id+", body TEXT NOT NULL, meta TEXT, tenant_id VARCHAR(32), state VARCHAR(16) NOT NULL DEFAULT 'new', tries INT NOT NULL DEFAULT 0, retry_at TIMESTAMP NULL, last_error TEXT)")
			mapping := filepath.Join(t.TempDir(), "events.yaml")
			if err := os.WriteFile(mapping, []byte(`table: outgoing_events
topic: tenant.events
max_attempts: 3
columns:
  id: id
  payload: body
  headers: meta
  header_columns: {tenant: tenant_id}
  status: state
  attempts: tries
  next_attempt: retry_at
  error: last_error
status: {pending: new, sent: done, failed: retry, dead: gave_up}
`), 0o600); err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				db.Exec(t, testdb.Placeholder(d, "INSERT INTO outgoing_events (body, meta, tenant_id) VALUES (?, ?, ?)"),
					fmt.Sprintf(`{"seq":%d}`, i), `{"x-origin":"billing"}`, fmt.Sprintf("t%d", i%2))
			}
			db.Exec(t, "INSERT INTO outgoing_events (body, meta) VALUES ('{\"seq\":99}', 'not json')")
			var mu sync.Mutex
			origin := map[string]string{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if strings.Contains(string(body), `"seq":7}`) {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				mu.Lock()
				origin[r.Header.Get("webhook-id")] = r.Header.Get("x-origin") + "/" + r.Header.Get("tenant")
				mu.Unlock()
			}))
			t.Cleanup(srv.Close)
			p := relaytest.StartRelay(t, db.URL, adoptArgs(mapping, srv.URL+"/events")...)
			relaytest.WaitFor(t, 30*time.Second, "nine rows done, two gave up", func() bool {
				return db.Count(t, "SELECT count(*) FROM outgoing_events WHERE state = 'done'") == 9 &&
					db.Count(t, "SELECT count(*) FROM outgoing_events WHERE state = 'gave_up'") == 2
			})
			p.Stop(t)
			if n := db.Count(t, "SELECT count(*) FROM outgoing_events WHERE state = 'gave_up' AND tries = 3 AND last_error LIKE '%500%'"); n != 1 {
				t.Error("the failing row did not give up after its 3 attempts with the reason")
			}
			if n := db.Count(t, "SELECT count(*) FROM outgoing_events WHERE state = 'gave_up' AND last_error LIKE '%headers are not a JSON object%'"); n != 1 {
				t.Error("the row with bad headers is not dead with the reason")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(origin) != 9 {
				t.Errorf("%d messages arrived, want 9", len(origin))
			}
			for id, o := range origin {
				if o != "billing/t0" && o != "billing/t1" {
					t.Errorf("message %s arrived with headers %q, want billing/t0 or billing/t1", id, o)
				}
			}
		})
	}
}
