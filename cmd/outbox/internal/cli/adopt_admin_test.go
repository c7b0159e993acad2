package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestAdoptRelayAdmin: `relay --adopt spring --admin` serves the admin
// API over the adopted table: the counts match the table (and list its
// own status values), list, search and detail read its rows, the
// changes it does not take answer 501, and a dead row requeued through
// the API goes back to PENDING and is delivered by the relay.
func TestAdoptRelayAdmin(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		adopttest.Create(t, db, "spring")
		insertSpring(t, db, springRow{"SENT", 0, ""}, springRow{"CONSUMED", 0, ""}, springRow{"FAILED", 10, "boom"}, springRow{"FAILED", 10, "bang"})
		var mu sync.Mutex
		delivered := map[string]int{}
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			delivered[r.Header.Get("webhook-id")]++
			mu.Unlock()
		}))
		t.Cleanup(hook.Close)

		const token = "adopted-admin-token-5f1c"
		vars := dbVars(db)
		vars["OUTBOX_ADMIN_TOKEN"] = token
		addr, stderr, stop := startCLI(t, vars, "relay", "--adopt", "spring", "--to", hook.URL, "--max-poll", "50ms", "--lease-ttl", "1s", "--admin", "127.0.0.1:0")
		api := "http://" + addr + "/api/v1/"
		getJSON := func(path string, v any) {
			t.Helper()
			code, body := get(t, api+path, token)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, code, body)
			}
			if err := json.Unmarshal([]byte(body), v); err != nil {
				t.Fatalf("GET %s: %v: %s", path, err, body)
			}
		}

		var st struct {
			Pending, Sent, Consumed, Dead int64
			Table                         struct {
				Name, Profile string
				States        []struct {
					State string
					Count int64
				}
				Refused []string
			}
		}
		getJSON("stats", &st)
		if st.Pending != 0 || st.Sent != 1 || st.Consumed != 1 || st.Dead != 2 {
			t.Errorf("stats: %+v, want 0 pending, 1 sent, 1 consumed, 2 dead", st)
		}
		if st.Table.Name != "t_local_message" || st.Table.Profile != "spring" || fmt.Sprint(st.Table.States) != "[{CONSUMED 1} {FAILED 2} {SENT 1}]" {
			t.Errorf("stats table: %+v", st.Table)
		}

		type msg struct {
			MessageID   string `json:"message_id"`
			Status      string `json:"status"`
			TableStatus string `json:"table_status"`
			Attempts    int    `json:"attempts"`
			LastError   string `json:"last_error"`
			Payload     string `json:"payload"`
			Headers     map[string]string
		}
		var list struct{ Messages []msg }
		getJSON("messages?status=dead", &list)
		if len(list.Messages) != 2 || list.Messages[0].MessageID != "m-3" || list.Messages[1].MessageID != "m-2" ||
			list.Messages[1].TableStatus != "FAILED" || list.Messages[1].LastError != "boom" || list.Messages[1].Attempts != 10 {
			t.Errorf("dead messages: %+v", list.Messages)
		}
		getJSON("messages?topic=user-register&key=user-1", &list)
		if len(list.Messages) != 1 || list.Messages[0].MessageID != "m-1" || list.Messages[0].Status != "consumed" {
			t.Errorf("search by key: %+v", list.Messages)
		}
		var one msg
		getJSON("messages/m-2", &one)
		if one.Status != "dead" || one.Payload != `{"seq":2}` || one.Headers["tag"] != "sync-crm" {
			t.Errorf("detail: %+v", one)
		}
		if code, body := get(t, api+"messages/m-9", token); code != http.StatusNotFound {
			t.Errorf("unknown id: %d %s", code, body)
		}

		for _, c := range []struct{ method, path string }{
			{"DELETE", "messages/m-2"}, {"POST", "messages/m-0/consumed"}, {"POST", "messages/replay"},
			{"POST", "messages/requeue"}, {"POST", "messages/discard"},
		} {
			if code, body := do(t, c.method, api+c.path, token); code != http.StatusNotImplemented || !strings.Contains(body, "adopted table t_local_message") {
				t.Errorf("%s %s: %d %s, want 501 naming the table", c.method, c.path, code, body)
			}
		}
		if code, body := do(t, "POST", api+"messages/m-2/requeue", ""); code != http.StatusUnauthorized {
			t.Errorf("requeue without a token: %d %s", code, body)
		}
		if code, body := do(t, "POST", api+"messages/m-0/requeue", token); code != http.StatusConflict || !strings.Contains(body, "only dead rows") {
			t.Errorf("requeue of a sent row: %d %s", code, body)
		}
		if code, body := do(t, "POST", api+"messages/m-2/requeue", token); code != http.StatusOK || !strings.Contains(body, `"changed":true`) {
			t.Fatalf("requeue: %d %s", code, body)
		}
		waitFor(t, "the requeued row delivered", func() bool {
			return db.Count(t, "SELECT count(*) FROM t_local_message WHERE message_id = 'm-2' AND status = 'SENT' AND retry_count = 0") == 1
		})
		mu.Lock()
		if delivered["m-2"] != 1 || len(delivered) != 1 {
			t.Errorf("deliveries: %v, want m-2 once", delivered)
		}
		mu.Unlock()
		if n := db.Count(t, "SELECT count(*) FROM t_local_message WHERE message_id = 'm-3' AND status = 'FAILED'"); n != 1 {
			t.Error("the other dead row changed")
		}
		var audit struct {
			Entries []struct{ Actor, Action, Target string }
		}
		getJSON("audit", &audit)
		if len(audit.Entries) != 1 || audit.Entries[0].Action != "requeue" || audit.Entries[0].Target != "m-2" {
			t.Errorf("audit: %+v", audit.Entries)
		}
		if code := stop(); code != 0 {
			t.Fatalf("relay exited %d\n%s", code, stderr.String())
		}
	})
}

// TestAdoptRelayFleet: `relay --adopt codes` over two databases (a
// fleet) delivers the rows of each database's own table and marks them
// sent there; outbox_messages, which also holds a message, is not read.
func TestAdoptRelayFleet(t *testing.T) {
	t.Parallel()
	a, b := testdb.New(t, store.SQLite), testdb.New(t, store.Postgres)
	const rows = 5
	for _, db := range []*testdb.DB{a, b} {
		adopttest.Create(t, db, "codes")
		for i := range rows {
			adopttest.Insert(t, db, "codes", i, 2, "fleet.adopted")
		}
		enqueueOK(t, nil, "--db", db.URL, "--topic", "fleet.outbox", "--payload", `{"n":1}`)
	}
	var mu sync.Mutex
	topics := map[string]int{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		topics[r.Header.Get("outbox-topic")]++
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	var stdout, stderr syncbuf.Buffer
	stop := startRelay(t, nil, &stdout, &stderr, "--adopt", "codes", "--db", a.URL, "--db", b.URL, "--to", hook.URL, "--max-poll", "50ms", "--lease-ttl", "1s")
	sent := func(db *testdb.DB) int { return db.Count(t, "SELECT count(*) FROM local_message WHERE status = 1") }
	waitFor(t, "both tables' rows sent", func() bool { return sent(a) == rows && sent(b) == rows })
	if code := stop(); code != 0 {
		t.Errorf("relay exited %d: %s", code, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if topics["fleet.adopted"] != 2*rows || topics["fleet.outbox"] != 0 {
		t.Errorf("delivered %v, want %d of the tables' rows and none of outbox_messages", topics, 2*rows)
	}
}
