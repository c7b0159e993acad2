package admin_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
)

const opsToken = "ops-token-7d2e9a"

// forEachDialect runs fn in parallel on a fresh database of each dialect.
func forEachDialect(t *testing.T, fn func(t *testing.T, db *testdb.DB)) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, testdb.New(t, d))
		})
	}
}

// newAdmin serves an admin Server over db with cfg (nil: one token, "ops").
func newAdmin(t *testing.T, db *testdb.DB, cfg *admin.Config) *httptest.Server {
	t.Helper()
	if cfg == nil {
		cfg = &admin.Config{Tokens: []admin.Token{{Name: "ops", Secret: opsToken}}}
	}
	if cfg.Logger == nil {
		cfg.Logger = relaytest.Logger()
	}
	var srv *admin.Server
	var err error
	if db.PGX != nil {
		srv, err = admin.New(db.PGX, cfg)
	} else {
		srv, err = admin.New(db.Std, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

// answer is one HTTP answer.
type answer struct {
	status int
	header http.Header
	body   string
}

// decode decodes the answer's JSON body into v.
func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(a.body), v); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, a.body)
	}
}

// want fails the test unless the answer has status.
func (a answer) want(t *testing.T, status int) answer {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
	}
	return a
}

// wantError asserts status and a one-line JSON error containing every part.
func (a answer) wantError(t *testing.T, status int, parts ...string) {
	t.Helper()
	if a.status != status {
		t.Errorf("status %d, want %d: %s", a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	if strings.Count(a.body, "\n") != 1 || !strings.HasSuffix(a.body, "\n") {
		t.Errorf("error is not one line: %q", a.body)
	}
	var e map[string]string
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || len(e) != 1 || e["error"] == "" {
		t.Errorf("error body %q is not {\"error\": \"…\"}", a.body)
	}
	for _, p := range parts {
		if !strings.Contains(e["error"], p) {
			t.Errorf("error %q does not contain %q", e["error"], p)
		}
	}
}

// call sends a request with token as a bearer token ("" for none).
func call(t *testing.T, ts *httptest.Server, method, path, token string, body any) answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: string(b)}
}

// enqueue commits n messages of topic (keys k0, k1, …) and returns their ids.
func enqueue(t *testing.T, db *testdb.DB, topic string, n int) []string {
	t.Helper()
	p, err := outbox.NewProducer(db.Std, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	err = db.Std.InTx(t.Context(), func(tx *sql.Tx) error {
		ids, err = p.EnqueueMany(t.Context(), tx, relaytest.Messages(topic, 0, n, n))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// setStatus moves messages to status with 3 attempts and an error.
func setStatus(t *testing.T, db *testdb.DB, status string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET status = ?, attempts = 3, last_error = 'broker said no', sent_at = created_at WHERE message_id = ?"), status, id)
	}
}

func statusOf(t *testing.T, db *testdb.DB, id string) string {
	t.Helper()
	var s string
	err := db.SQL.QueryRowContext(t.Context(), testdb.Placeholder(db.Dialect, "SELECT status FROM outbox_messages WHERE message_id = ?"), id).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return "gone"
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type auditEntry struct {
	Actor, Action, Target string
	Count                 int64
}

func auditLog(t *testing.T, ts *httptest.Server) []auditEntry {
	t.Helper()
	var out struct{ Entries []auditEntry }
	call(t, ts, "GET", "/api/v1/audit", opsToken, nil).want(t, 200).decode(t, &out)
	return out.Entries
}

func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	ids := enqueue(t, db, "order.created", 2)
	setStatus(t, db, "dead", ids...)
	requeue := "/api/v1/messages/" + ids[0] + "/requeue"

	t.Run("no token configured", func(t *testing.T) {
		ts := newAdmin(t, db, &admin.Config{})
		call(t, ts, "GET", "/api/v1/stats", "", nil).want(t, 200)
		call(t, ts, "GET", "/api/v1/messages?status=dead", "", nil).want(t, 200)
		call(t, ts, "POST", requeue, "", nil).wantError(t, 403, "no admin token is configured")
		call(t, ts, "DELETE", "/api/v1/messages/"+ids[0], "", nil).wantError(t, 403)
		call(t, ts, "POST", "/api/v1/messages/requeue", "", `{"all": true}`).wantError(t, 403)
		call(t, ts, "POST", "/api/v1/messages/replay", "", `{"all": true}`).wantError(t, 403)
		call(t, ts, "GET", "/api/v1/stats", "anything", nil).wantError(t, 401, "unknown token")
		call(t, ts, "GET", "/api/v1/stats?token=anything", "", nil).wantError(t, 401, "query string")
		if s := statusOf(t, db, ids[0]); s != "dead" {
			t.Errorf("refused requeue changed the message: %s", s)
		}
	})

	t.Run("token configured", func(t *testing.T) {
		ts := newAdmin(t, db, &admin.Config{Tokens: []admin.Token{{Name: "ci", Secret: "ci-token-0001"}, {Name: "ops", Secret: opsToken}}})
		a := call(t, ts, "GET", "/api/v1/stats", "", nil)
		a.wantError(t, 401, "missing Authorization")
		if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("WWW-Authenticate %q", a.header.Get("WWW-Authenticate"))
		}
		call(t, ts, "GET", "/api/v1/stats", "wrong-token", nil).wantError(t, 401, "unknown token")
		call(t, ts, "GET", "/api/v1/stats", opsToken[:len(opsToken)-1], nil).wantError(t, 401)
		call(t, ts, "POST", requeue, "wrong-token", nil).wantError(t, 401)
		call(t, ts, "POST", requeue, "", nil).wantError(t, 401)
		call(t, ts, "GET", "/api/v1/stats?token="+opsToken, "", nil).wantError(t, 401, "query string")
		call(t, ts, "GET", "/api/v1/stats?access_token="+opsToken, opsToken, nil).wantError(t, 401, "query string")
		basic, _ := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/api/v1/stats", nil)
		basic.SetBasicAuth("ops", opsToken)
		res, err := ts.Client().Do(basic)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 401 {
			t.Errorf("basic auth: %d, want 401", res.StatusCode)
		}
		if s := statusOf(t, db, ids[0]); s != "dead" {
			t.Errorf("unauthorized requeue changed the message: %s", s)
		}

		call(t, ts, "GET", "/api/v1/stats", opsToken, nil).want(t, 200)
		call(t, ts, "POST", requeue, opsToken, nil).want(t, 200)
		if s := statusOf(t, db, ids[0]); s != "pending" {
			t.Errorf("after requeue: %s", s)
		}
		call(t, ts, "POST", "/api/v1/messages/"+ids[1]+"/requeue", "ci-token-0001", nil).want(t, 200)
		es := auditLog(t, ts)
		if len(es) != 2 || es[0].Actor != "ci" || es[1].Actor != "ops" || es[1].Target != ids[0] || es[1].Action != "requeue" || es[1].Count != 1 {
			t.Errorf("audit: %+v", es)
		}
		// Health, metrics and the page need no token.
		for _, p := range []string{"/healthz", "/readyz", "/", "/app.js"} {
			call(t, ts, "GET", p, "", nil).want(t, 200)
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	cases := map[string]admin.Config{
		"empty name":       {Tokens: []admin.Token{{Secret: "abcdef"}}},
		"empty secret":     {Tokens: []admin.Token{{Name: "ops"}}},
		"space in secret":  {Tokens: []admin.Token{{Name: "ops", Secret: "a b"}}},
		"duplicate name":   {Tokens: []admin.Token{{Name: "ops", Secret: "one-1"}, {Name: "ops", Secret: "two-2"}}},
		"duplicate secret": {Tokens: []admin.Token{{Name: "a", Secret: "same-1"}, {Name: "b", Secret: "same-1"}}},
		"negative history": {HistoryInterval: -time.Second},
	}
	for name, cfg := range cases {
		if _, err := admin.New(db.Std, &cfg); err == nil || strings.Contains(err.Error(), "same-1") || strings.Contains(err.Error(), "one-1") {
			t.Errorf("%s: err %v (want an error that does not show secrets)", name, err)
		}
	}
}

type messageJSON struct {
	ID             int64             `json:"id"`
	MessageID      string            `json:"message_id"`
	Topic          string            `json:"topic"`
	BusinessKey    *string           `json:"business_key"`
	Status         string            `json:"status"`
	Attempts       int               `json:"attempts"`
	MaxAttempts    int               `json:"max_attempts"`
	CreatedAt      time.Time         `json:"created_at"`
	AvailableAt    time.Time         `json:"available_at"`
	SentAt         *time.Time        `json:"sent_at"`
	ConsumedAt     *time.Time        `json:"consumed_at"`
	LastError      *string           `json:"last_error"`
	PayloadPreview string            `json:"payload_preview"`
	Payload        *string           `json:"payload"`
	Headers        map[string]string `json:"headers"`
}

type searchJSON struct {
	Messages   []messageJSON `json:"messages"`
	NextBefore *int64        `json:"next_before"`
}

func TestSearchAndGet(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *testdb.DB) {
		ts := newAdmin(t, db, nil)
		a := enqueue(t, db, "order.created", 5)
		b := enqueue(t, db, "order.paid", 2)
		setStatus(t, db, "dead", a[1], a[3], b[0])

		var res searchJSON
		call(t, ts, "GET", "/api/v1/messages?status=dead", opsToken, nil).want(t, 200).decode(t, &res)
		if len(res.Messages) != 3 || res.Messages[0].MessageID != b[0] || res.Messages[2].MessageID != a[1] || res.NextBefore != nil {
			t.Fatalf("dead, newest first: %+v", res)
		}
		m := res.Messages[0]
		if m.Status != "dead" || m.Attempts != 3 || m.LastError == nil || *m.LastError != "broker said no" || m.Payload != nil || m.PayloadPreview == "" || m.BusinessKey == nil {
			t.Errorf("search row: %+v", m)
		}
		key := *m.BusinessKey
		res = searchJSON{}
		call(t, ts, "GET", "/api/v1/messages?status=dead&topic=order.created", opsToken, nil).want(t, 200).decode(t, &res)
		if len(res.Messages) != 2 {
			t.Errorf("dead order.created: %+v", res.Messages)
		}
		call(t, ts, "GET", "/api/v1/messages?key="+key+"&topic=order.paid", opsToken, nil).want(t, 200).decode(t, &res)
		if len(res.Messages) != 1 || res.Messages[0].MessageID != b[0] {
			t.Errorf("by key: %+v", res.Messages)
		}
		call(t, ts, "GET", "/api/v1/messages?id="+strings.ToUpper(a[2]), opsToken, nil).want(t, 200).decode(t, &res)
		if len(res.Messages) != 1 || res.Messages[0].MessageID != a[2] {
			t.Errorf("by id: %+v", res.Messages)
		}
		since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		call(t, ts, "GET", "/api/v1/messages?since="+since+"&until=2999-01-01T00:00:00Z", opsToken, nil).want(t, 200).decode(t, &res)
		if len(res.Messages) != 7 {
			t.Errorf("since an hour ago: %d messages, want 7", len(res.Messages))
		}
		call(t, ts, "GET", "/api/v1/messages?until="+since, opsToken, nil).want(t, 200).decode(t, &res)
		if len(res.Messages) != 0 {
			t.Errorf("until an hour ago: %d messages, want 0", len(res.Messages))
		}

		// Pages of 3 walk all 7 messages once, newest first.
		var seen []string
		path := "/api/v1/messages?limit=3"
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatal("too many pages")
			}
			call(t, ts, "GET", path, opsToken, nil).want(t, 200).decode(t, &res)
			for _, m := range res.Messages {
				seen = append(seen, m.MessageID)
			}
			if res.NextBefore == nil {
				break
			}
			path = fmt.Sprintf("/api/v1/messages?limit=3&before=%d", *res.NextBefore)
		}
		want := append(append([]string{}, a...), b...)
		if len(seen) != len(want) {
			t.Fatalf("paged %d messages, want %d", len(seen), len(want))
		}
		for i := range want {
			if seen[i] != want[len(want)-1-i] {
				t.Fatalf("page order: %v", seen)
			}
		}

		var one messageJSON
		call(t, ts, "GET", "/api/v1/messages/"+a[0], opsToken, nil).want(t, 200).decode(t, &one)
		if one.MessageID != a[0] || one.Payload == nil || *one.Payload == "" || one.Headers["content-type"] != "application/json" || one.Status != "pending" || one.LastError != nil {
			t.Errorf("one message: %+v", one)
		}
		if !json.Valid([]byte(*one.Payload)) || *one.Payload != one.PayloadPreview {
			t.Errorf("payload %q, preview %q", *one.Payload, one.PayloadPreview)
		}
		call(t, ts, "GET", "/api/v1/messages/"+uuid.NewString(), opsToken, nil).wantError(t, 404, "no message")
		call(t, ts, "GET", "/api/v1/messages/not-a-uuid", opsToken, nil).wantError(t, 400, "not a UUID")
	})
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	ts := newAdmin(t, db, nil)
	id := enqueue(t, db, "order.created", 1)[0]
	cases := []struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		{"GET", "/api/v1/messages?status=sen", nil, 400, `unknown status "sen" (want pending, sent, consumed, dead or expired)`},
		{"GET", "/api/v1/messages?since=yesterday", nil, 400, "not an RFC 3339 time"},
		{"GET", "/api/v1/messages?until=2026-13-01T00:00:00Z", nil, 400, "until"},
		{"GET", "/api/v1/messages?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z", nil, 400, "since must be before until"},
		{"GET", "/api/v1/messages?limit=0", nil, 400, "limit must be a whole number from 1 to 500"},
		{"GET", "/api/v1/messages?limit=501", nil, 400, "limit"},
		{"GET", "/api/v1/messages?limit=ten", nil, 400, "limit"},
		{"GET", "/api/v1/messages?before=-3", nil, 400, "before"},
		{"GET", "/api/v1/messages?id=42", nil, 400, "not a UUID"},
		{"GET", "/api/v1/messages?topic=" + strings.Repeat("t", 256), nil, 400, "longer than 255"},
		{"GET", "/api/v1/messages?sort=asc", nil, 400, `unknown query parameter "sort"`},
		{"GET", "/api/v1/messages?status=dead&status=sent", nil, 400, "given 2 times"},
		{"GET", "/api/v1/stats?verbose=1", nil, 400, "takes none"},
		{"GET", "/api/v1/audit?limit=0", nil, 400, "limit"},
		{"POST", "/api/v1/messages/" + id + "/requeue?force=1", nil, 400, "unknown query parameter"},
		{"POST", "/api/v1/messages/requeue", `{"filter": {"topic": "x"}, "dryrun": true}`, 400, `unknown field "dryrun"`},
		{"POST", "/api/v1/messages/requeue", `{"filter": {"status": "dead"}}`, 400, `"all": true`},
		{"POST", "/api/v1/messages/requeue", ``, 400, "want a JSON object"},
		{"POST", "/api/v1/messages/requeue", `{"all": true} {}`, 400, "after the JSON object"},
		{"POST", "/api/v1/messages/requeue", `{"all": tru`, 400, "request body"},
		{"POST", "/api/v1/messages/discard", `{"filter": {"status": "sent", "topic": "x"}}`, 400, "discard applies to dead or expired messages only"},
		{"POST", "/api/v1/messages/consumed", `{"filter": {"status": "dead"}, "all": true}`, 400, "consumed applies to sent messages only"},
		{"POST", "/api/v1/messages/requeue", `{"filter": {"ids": ["nope"]}}`, 400, "filter.ids[0]"},
		{"POST", "/api/v1/messages/requeue", `{"filter": {"since": "monday"}}`, 400, "filter.since"},
		{"POST", "/api/v1/messages/replay", `{"filter": {"status": "dead"}, "all": true}`, 400, "replay applies to sent or consumed messages"},
		{"POST", "/api/v1/messages/replay", `{"filter": {}}`, 400, `"all": true`},
		{"POST", "/api/v1/messages/requeue", `{"all": true, "archive": true}`, 400, `"archive" applies to replay only`},
		{"POST", "/api/v1/messages/discard", `{"all": true, "yes": true}`, 400, `"yes" applies to replay only`},
		{"POST", "/api/v1/messages/requeue", strings.Repeat(" ", admin.MaxBodyBytes+1), 413, "larger than 64 KiB"},
		{"POST", "/api/v1/messages/" + id + "/requeue", strings.Repeat("x", 70<<10), 413, "larger than 64 KiB"},
		{"POST", "/api/v1/stats", nil, 405, "not allowed"},
		{"GET", "/api/v1/nothing", nil, 404, "no such endpoint"},
		{"GET", "/api/v1/messages/requeue", nil, 400, "not a UUID"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path[:min(len(c.path), 60)], func(t *testing.T) {
			call(t, ts, c.method, c.path, opsToken, c.body).wantError(t, c.status, c.want)
		})
	}
	if s := statusOf(t, db, id); s != "pending" {
		t.Errorf("bad requests changed the message: %s", s)
	}
	if es := auditLog(t, ts); len(es) != 0 {
		t.Errorf("bad requests were audited: %+v", es)
	}
	a := call(t, ts, "POST", "/api/v1/stats", opsToken, nil)
	if a.header.Get("Allow") != "GET" {
		t.Errorf("405 Allow: %q", a.header.Get("Allow"))
	}
}

type changeJSON struct {
	MessageID string `json:"message_id"`
	Status    string `json:"status"`
	Changed   bool   `json:"changed"`
}

func TestSingleChanges(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *testdb.DB) {
		ts := newAdmin(t, db, nil)
		ids := enqueue(t, db, "order.created", 4)
		dead, sent, pending, other := ids[0], ids[1], ids[2], ids[3]
		setStatus(t, db, "dead", dead, other)
		setStatus(t, db, "sent", sent)
		msg := "/api/v1/messages/"

		call(t, ts, "POST", msg+uuid.NewString()+"/requeue", opsToken, nil).wantError(t, 404, "no message with id")
		call(t, ts, "POST", msg+sent+"/requeue", opsToken, nil).wantError(t, 409, "is sent")
		var ch changeJSON
		call(t, ts, "POST", msg+dead+"/requeue", opsToken, nil).want(t, 200).decode(t, &ch)
		if ch != (changeJSON{MessageID: dead, Status: "pending", Changed: true}) {
			t.Errorf("requeue answer: %+v", ch)
		}
		var m messageJSON
		call(t, ts, "GET", msg+dead, opsToken, nil).want(t, 200).decode(t, &m)
		if m.Status != "pending" || m.Attempts != 0 || m.AvailableAt.After(time.Now().Add(time.Minute)) {
			t.Errorf("requeued message: %+v", m)
		}

		call(t, ts, "DELETE", msg+pending, opsToken, nil).wantError(t, 409, "only dead or expired messages can be discarded")
		call(t, ts, "DELETE", msg+uuid.NewString(), opsToken, nil).wantError(t, 404)
		call(t, ts, "DELETE", msg+strings.ToUpper(other), opsToken, nil).want(t, 200)
		if s := statusOf(t, db, other); s != "gone" {
			t.Errorf("discarded message is %s", s)
		}
		call(t, ts, "DELETE", msg+other, opsToken, nil).wantError(t, 404)

		call(t, ts, "POST", msg+pending+"/consumed", opsToken, nil).wantError(t, 409, "is pending")
		call(t, ts, "POST", msg+uuid.NewString()+"/consumed", opsToken, nil).wantError(t, 404)
		call(t, ts, "POST", msg+sent+"/consumed", opsToken, nil).want(t, 200).decode(t, &ch)
		if !ch.Changed || ch.Status != "consumed" {
			t.Errorf("consumed answer: %+v", ch)
		}
		call(t, ts, "GET", msg+sent, opsToken, nil).want(t, 200).decode(t, &m)
		if m.Status != "consumed" || m.ConsumedAt == nil {
			t.Errorf("consumed message: %+v", m)
		}
		call(t, ts, "POST", msg+sent+"/consumed", opsToken, nil).want(t, 200).decode(t, &ch)
		if ch.Changed || ch.Status != "consumed" {
			t.Errorf("consumed again: %+v (want unchanged, 200)", ch)
		}

		es := auditLog(t, ts)
		if len(es) != 3 || es[0].Action != "consumed" || es[1].Action != "discard" || es[2].Action != "requeue" || es[2].Target != dead || es[1].Target != other {
			t.Errorf("audit: %+v", es)
		}
	})
}

type bulkJSON struct {
	Matched int64 `json:"matched"`
	Changed int64 `json:"changed"`
	DryRun  bool  `json:"dry_run"`
}

func TestBulk(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *testdb.DB) {
		ts := newAdmin(t, db, nil)
		a := enqueue(t, db, "order.created", 30)
		b := enqueue(t, db, "order.paid", 3)
		setStatus(t, db, "dead", a...)
		setStatus(t, db, "dead", b...)
		deadCount := func() int { return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead'") }

		var res bulkJSON
		body := map[string]any{"filter": map[string]any{"status": "dead", "topic": "order.created"}, "dry_run": true}
		call(t, ts, "POST", "/api/v1/messages/requeue", opsToken, body).want(t, 200).decode(t, &res)
		if res != (bulkJSON{Matched: 30, DryRun: true}) {
			t.Errorf("dry run: %+v", res)
		}
		if n := deadCount(); n != 33 {
			t.Errorf("dry run changed rows: %d dead, want 33", n)
		}
		if es := auditLog(t, ts); len(es) != 0 {
			t.Errorf("dry run audited: %+v", es)
		}

		delete(body, "dry_run")
		call(t, ts, "POST", "/api/v1/messages/requeue", opsToken, body).want(t, 200).decode(t, &res)
		if res != (bulkJSON{Matched: 30, Changed: 30}) {
			t.Errorf("requeue: %+v", res)
		}
		if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 'order.created' AND status = 'pending' AND attempts = 0"); n != 30 {
			t.Errorf("%d requeued messages pending with attempts 0, want 30", n)
		}
		es := auditLog(t, ts)
		if len(es) != 1 || es[0].Actor != "ops" || es[0].Action != "requeue" || es[0].Count != 30 {
			t.Fatalf("audit after bulk requeue: %+v", es)
		}
		var target map[string]any
		if err := json.Unmarshal([]byte(es[0].Target), &target); err != nil || target["topic"] != "order.created" || target["status"] != "dead" {
			t.Errorf("audit target %q", es[0].Target)
		}

		call(t, ts, "POST", "/api/v1/messages/discard", opsToken, map[string]any{"filter": map[string]any{"ids": []string{b[0], a[0]}}}).want(t, 200).decode(t, &res)
		if res.Matched != 1 || res.Changed != 1 {
			t.Errorf("discard by ids (one of them pending): %+v", res)
		}
		call(t, ts, "POST", "/api/v1/messages/discard", opsToken, map[string]any{"all": true}).want(t, 200).decode(t, &res)
		if res.Matched != 2 || res.Changed != 2 || deadCount() != 0 {
			t.Errorf("discard all: %+v, %d dead left", res, deadCount())
		}
		setStatus(t, db, "sent", a[:5]...)
		call(t, ts, "POST", "/api/v1/messages/consumed", opsToken, map[string]any{"filter": map[string]any{"topic": "order.created"}}).want(t, 200).decode(t, &res)
		if res.Matched != 5 || res.Changed != 5 {
			t.Errorf("consumed: %+v", res)
		}
		if es := auditLog(t, ts); len(es) != 4 || es[0].Action != "consumed" || es[0].Count != 5 {
			t.Errorf("audit: %+v", es)
		}
	})
}

// gatedPublisher refuses every message with a permanent error until it is
// opened, then records what it delivers.
type gatedPublisher struct {
	open atomic.Bool
	mu   sync.Mutex
	got  map[string]int
}

func (p *gatedPublisher) Publish(_ context.Context, batch []*outbox.Envelope) []error {
	errs := make([]error, len(batch))
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, env := range batch {
		if !p.open.Load() {
			errs[i] = publisher.Permanent(errors.New("destination rejects it"))
			continue
		}
		if p.got == nil {
			p.got = map[string]int{}
		}
		p.got[env.ID]++
	}
	return errs
}

func (p *gatedPublisher) Close() error { return nil }

func (p *gatedPublisher) delivered(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got[id]
}

// TestRequeueDelivers: messages the relay killed are requeued through the
// API, one and in bulk, and then delivered by the running relay. Two
// messages: three new messages failing together, whatever the error, are
// taken for the destination's outage and never charged.
func TestRequeueDelivers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	pub := &gatedPublisher{}
	relaytest.Start(t, db, relaytest.Config(pub))
	ids := enqueue(t, db, "order.created", 2)
	relaytest.WaitFor(t, 20*time.Second, "2 dead messages", func() bool { return relaytest.Count(t, db, "dead") == 2 })
	pub.open.Store(true)

	ts := newAdmin(t, db, nil)
	call(t, ts, "POST", "/api/v1/messages/"+ids[0]+"/requeue", opsToken, nil).want(t, 200)
	var res bulkJSON
	call(t, ts, "POST", "/api/v1/messages/requeue", opsToken, map[string]any{"filter": map[string]any{"topic": "order.created", "status": "dead"}}).want(t, 200).decode(t, &res)
	if res.Changed != 1 {
		t.Fatalf("bulk requeue of what is still dead: %+v", res)
	}
	relaytest.WaitFor(t, 20*time.Second, "the requeued messages sent", func() bool { return relaytest.Count(t, db, "sent") == 2 })
	for _, id := range ids {
		if n := pub.delivered(id); n != 1 {
			t.Errorf("message %s delivered %d times, want 1", id, n)
		}
		var m messageJSON
		call(t, ts, "GET", "/api/v1/messages/"+id, opsToken, nil).want(t, 200).decode(t, &m)
		if m.Status != "sent" || m.Attempts != 1 || m.SentAt == nil {
			t.Errorf("delivered message: %+v (want sent after 1 attempt since the requeue)", m)
		}
	}
}

// TestReplayDelivers: delivered messages replayed through the API are
// delivered again by the running relay with the same message ids; a dry
// run changes nothing; more than store.DefaultReplayMax needs "yes"; each
// replay is audited.
func TestReplayDelivers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	pub := &gatedPublisher{}
	pub.open.Store(true)
	relaytest.Start(t, db, relaytest.Config(pub))
	ids := enqueue(t, db, "order.created", 3)
	relaytest.WaitFor(t, 20*time.Second, "3 sent", func() bool { return relaytest.Count(t, db, "sent") == 3 })

	ts := newAdmin(t, db, nil)
	var res bulkJSON
	body := map[string]any{"filter": map[string]any{"ids": ids[1:]}, "dry_run": true}
	call(t, ts, "POST", "/api/v1/messages/replay", opsToken, body).want(t, 200).decode(t, &res)
	if res != (bulkJSON{Matched: 2, DryRun: true}) || relaytest.Count(t, db, "sent") != 3 {
		t.Fatalf("dry run: %+v, %d sent", res, relaytest.Count(t, db, "sent"))
	}
	delete(body, "dry_run")
	call(t, ts, "POST", "/api/v1/messages/replay", opsToken, body).want(t, 200).decode(t, &res)
	if res != (bulkJSON{Matched: 2, Changed: 2}) {
		t.Fatalf("replay: %+v", res)
	}
	relaytest.WaitFor(t, 20*time.Second, "the replayed messages delivered again and settled", func() bool {
		return pub.delivered(ids[1]) == 2 && pub.delivered(ids[2]) == 2 && relaytest.Count(t, db, "sent") == 3
	})
	if n := pub.delivered(ids[0]); n != 1 {
		t.Errorf("message not replayed delivered %d times, want 1", n)
	}
	es := auditLog(t, ts)
	if len(es) != 1 || es[0].Actor != "ops" || es[0].Action != "replay" || es[0].Count != 2 || !strings.Contains(es[0].Target, ids[1]) {
		t.Errorf("audit after replay: %+v", es)
	}

	// Over the limit: refused unless the operator says yes.
	db.Exec(t, fmt.Sprintf("INSERT INTO outbox_messages (topic, payload, status, sent_at) SELECT 'order.bulk', '{}', 'sent', now() FROM generate_series(1, %d)", store.DefaultReplayMax+1))
	bulk := map[string]any{"filter": map[string]any{"topic": "order.bulk"}}
	call(t, ts, "POST", "/api/v1/messages/replay", opsToken, bulk).wantError(t, 409, fmt.Sprintf("more than %d", store.DefaultReplayMax), `"yes": true`)
	if n := relaytest.Count(t, db, "pending"); n != 0 {
		t.Errorf("a refused replay left %d pending", n)
	}
	bulk["yes"] = true
	call(t, ts, "POST", "/api/v1/messages/replay", opsToken, bulk).want(t, 200).decode(t, &res)
	if res.Changed != int64(store.DefaultReplayMax+1) {
		t.Errorf("replay with yes: %+v", res)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_admin_test_total", Help: "A counter for the test."})
	reg.MustRegister(c)
	c.Add(7)
	var notReady atomic.Pointer[string]
	ts := newAdmin(t, db, &admin.Config{
		Tokens:   []admin.Token{{Name: "ops", Secret: opsToken}},
		Gatherer: reg,
		Ready: func(context.Context) error {
			if p := notReady.Load(); p != nil {
				return errors.New(*p)
			}
			return nil
		},
	})
	if a := call(t, ts, "GET", "/healthz", "", nil).want(t, 200); a.body != "ok\n" {
		t.Errorf("healthz %q", a.body)
	}
	call(t, ts, "GET", "/readyz", "", nil).want(t, 200)
	reason := "relay is not running"
	notReady.Store(&reason)
	// Why is for token holders; anyone else learns "not ready" alone.
	call(t, ts, "GET", "/readyz", opsToken, nil).wantError(t, 503, "not ready: relay is not running")
	if a := call(t, ts, "GET", "/readyz", "", nil); a.status != 503 || strings.Contains(a.body, "running") {
		t.Errorf("readyz without a token: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "GET", "/readyz", "wrong-token", nil); a.status != 503 || strings.Contains(a.body, "running") {
		t.Errorf("readyz with a wrong token: %d %s", a.status, a.body)
	}
	a := call(t, ts, "GET", "/metrics", "", nil).want(t, 200)
	if !strings.Contains(a.body, "outbox_admin_test_total 7") || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Errorf("metrics (%s): %s", a.header.Get("Content-Type"), a.body)
	}

	bare := newAdmin(t, db, &admin.Config{})
	call(t, bare, "GET", "/metrics", "", nil).wantError(t, 404, "metrics are not configured")
	_ = db.SQL.Close()
	call(t, bare, "GET", "/readyz", "", nil).wantError(t, 503, "not ready")
}

func TestStaticPage(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	ts := newAdmin(t, db, nil)
	for path, ct := range map[string]string{"/": "text/html", "/app.js": "text/javascript", "/style.css": "text/css"} {
		a := call(t, ts, "GET", path, "", nil).want(t, 200)
		if !strings.HasPrefix(a.header.Get("Content-Type"), ct) || a.body == "" {
			t.Errorf("%s: content type %q, %d bytes", path, a.header.Get("Content-Type"), len(a.body))
		}
		if !strings.Contains(a.header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("%s: CSP %q", path, a.header.Get("Content-Security-Policy"))
		}
	}
	if a := call(t, ts, "GET", "/", "", nil); !strings.Contains(a.body, "app.js") {
		t.Errorf("the page does not load app.js:\n%s", a.body)
	}
	call(t, ts, "GET", "/nothing.js", "", nil).want(t, 404)
}

type historyJSON struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	Samples         []struct {
		At                      time.Time `json:"at"`
		Pending                 int64     `json:"pending"`
		Dead                    int64     `json:"dead"`
		OldestPendingAgeSeconds float64   `json:"oldest_pending_age_seconds"`
		DeliveredPerSecond      *float64  `json:"delivered_per_second"`
	} `json:"samples"`
}

func TestHistory(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	ids := enqueue(t, db, "order.created", 3)
	setStatus(t, db, "dead", ids[0])
	var delivered atomic.Int64
	srv, err := admin.New(db.Std, &admin.Config{
		HistoryInterval: 20 * time.Millisecond,
		Delivered:       func() int64 { return delivered.Add(10) },
		Logger:          relaytest.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var h historyJSON
	call(t, ts, "GET", "/api/v1/stats/history", "", nil).want(t, 200).decode(t, &h)
	if len(h.Samples) != 0 || h.IntervalSeconds != 0.02 {
		t.Fatalf("history before Run: %+v", h)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	relaytest.WaitFor(t, 10*time.Second, "3 samples", func() bool {
		call(t, ts, "GET", "/api/v1/stats/history", "", nil).want(t, 200).decode(t, &h)
		return len(h.Samples) >= 3
	})
	if err := srv.Run(ctx); err == nil {
		t.Error("a second Run at the same time did not fail")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	first, second := h.Samples[0], h.Samples[1]
	if first.Pending != 2 || first.Dead != 1 || first.DeliveredPerSecond != nil {
		t.Errorf("first sample: %+v", first)
	}
	if second.DeliveredPerSecond == nil || *second.DeliveredPerSecond <= 0 || !second.At.After(first.At) {
		t.Errorf("second sample: %+v", second)
	}
}

// TestStatsRoutes: /api/v1/stats lists the routes live relays recorded as
// down or up again, one per route.
func TestStatsRoutes(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	st := db.Backend().Store
	ctx := t.Context()
	if _, err := st.Heartbeat(ctx, "r1", "[]", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordRoute(ctx, "r1", "orders", true, "HTTP 503 Service Unavailable"); err != nil {
		t.Fatal(err)
	}
	srv, err := admin.New(db.Std, &admin.Config{Logger: relaytest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var got struct {
		Routes []struct {
			Route, State, Reason string
			Since                time.Time
			Relays               []string
		}
	}
	call(t, ts, "GET", "/api/v1/stats", "", nil).want(t, 200).decode(t, &got)
	if len(got.Routes) != 1 || got.Routes[0].State != "down" || got.Routes[0].Reason != "HTTP 503 Service Unavailable" ||
		got.Routes[0].Since.IsZero() || strings.Join(got.Routes[0].Relays, ",") != "r1" {
		t.Fatalf("routes: %+v", got.Routes)
	}
}

// TestStatsRelays: /api/v1/stats lists the live relays with their routes
// and says whether they route alike.
func TestStatsRelays(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	st := db.Backend().Store
	ctx := t.Context()
	srv, err := admin.New(db.Std, &admin.Config{Logger: relaytest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	type stats struct {
		Relays []struct {
			ID                string   `json:"id"`
			Routes            []string `json:"routes"`
			RoutesFingerprint string   `json:"routes_fingerprint"`
		}
		RoutesAgree bool `json:"routes_agree"`
	}
	for _, step := range []struct {
		relay, routes string
		agree         bool
	}{
		{"r1", store.EncodeRoutes([]string{"order.*"}), true},
		{"r2", store.EncodeRoutes([]string{"order.*"}), true},
		{"r3", store.EncodeRoutes([]string{"order.*", "audit.>"}), false},
	} {
		if _, err := st.Heartbeat(ctx, step.relay, step.routes, time.Minute); err != nil {
			t.Fatal(err)
		}
		var got stats
		call(t, ts, "GET", "/api/v1/stats", "", nil).want(t, 200).decode(t, &got)
		last := got.Relays[len(got.Relays)-1]
		if last.ID != step.relay || last.RoutesFingerprint == "" || strings.Join(last.Routes, " ") == "" {
			t.Fatalf("after %s's heartbeat: relays %+v", step.relay, got.Relays)
		}
		if got.RoutesAgree != step.agree {
			t.Fatalf("after %s's heartbeat: routes_agree %v, want %v (relays %+v)", step.relay, got.RoutesAgree, step.agree, got.Relays)
		}
	}
}

// TestSnapshotReadStatus: on a database read by snapshots, where a
// delivered message keeps status pending in its row, the API shows,
// searches, counts and guards by the status the relays see: delivered
// messages are sent, can be marked consumed and replayed (and the relay
// delivers a replayed one again), and cannot be requeued.
func TestSnapshotReadStatus(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	if err := db.Store().EnableSnapshotRead(t.Context()); err != nil {
		t.Fatal(err)
	}
	pub := &gatedPublisher{}
	pub.open.Store(true)
	cfg := relaytest.Config(pub)
	cfg.SnapshotRead = true
	relaytest.Start(t, db, cfg)
	ids := enqueue(t, db, "order.created", 3)
	relaytest.WaitFor(t, 20*time.Second, "3 delivered", func() bool {
		return pub.delivered(ids[0]) == 1 && pub.delivered(ids[1]) == 1 && pub.delivered(ids[2]) == 1
	})
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'pending'`); n != 3 {
		t.Fatalf("%d rows pending, want the 3 delivered by snapshots unwritten", n)
	}

	ts := newAdmin(t, db, nil)
	var stats store.StatsJSON
	call(t, ts, "GET", "/api/v1/stats", opsToken, nil).want(t, 200).decode(t, &stats)
	if stats.Sent != 3 || stats.Pending != 0 {
		t.Errorf("stats: %d sent, %d pending; want 3 and 0", stats.Sent, stats.Pending)
	}
	var sr searchJSON
	call(t, ts, "GET", "/api/v1/messages?status=sent", opsToken, nil).want(t, 200).decode(t, &sr)
	if len(sr.Messages) != 3 {
		t.Errorf("search sent: %d messages, want 3", len(sr.Messages))
	}
	call(t, ts, "GET", "/api/v1/messages?status=pending", opsToken, nil).want(t, 200).decode(t, &sr)
	if len(sr.Messages) != 0 {
		t.Errorf("search pending: %d messages, want none", len(sr.Messages))
	}
	var m messageJSON
	call(t, ts, "GET", "/api/v1/messages/"+ids[0], opsToken, nil).want(t, 200).decode(t, &m)
	if m.Status != "sent" {
		t.Errorf("message %s: status %q, want sent", ids[0], m.Status)
	}
	call(t, ts, "POST", "/api/v1/messages/"+ids[0]+"/requeue", opsToken, nil).wantError(t, 409, "is sent")
	call(t, ts, "POST", "/api/v1/messages/"+ids[0]+"/consumed", opsToken, nil).want(t, 200)
	call(t, ts, "GET", "/api/v1/messages/"+ids[0], opsToken, nil).want(t, 200).decode(t, &m)
	if m.Status != "consumed" {
		t.Errorf("after marking consumed: %q", m.Status)
	}

	var res bulkJSON
	call(t, ts, "POST", "/api/v1/messages/replay", opsToken, map[string]any{"filter": map[string]any{"ids": ids[1:2]}}).want(t, 200).decode(t, &res)
	if res != (bulkJSON{Matched: 1, Changed: 1}) {
		t.Fatalf("replay: %+v", res)
	}
	relaytest.WaitFor(t, 20*time.Second, "the replayed message delivered again", func() bool { return pub.delivered(ids[1]) == 2 })
	relaytest.WaitFor(t, 20*time.Second, "the replayed message sent again", func() bool {
		call(t, ts, "GET", "/api/v1/messages/"+ids[1], opsToken, nil).want(t, 200).decode(t, &m)
		return m.Status == "sent"
	})
	if n := pub.delivered(ids[2]); n != 1 {
		t.Errorf("a message not replayed was delivered %d times", n)
	}
}
