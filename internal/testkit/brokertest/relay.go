package brokertest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// RunRelay runs the relay suite; newTarget is called once per subtest,
// which runs in parallel with the others.
func RunRelay(t *testing.T, newTarget func(t *testing.T) *Target) {
	t.Helper()
	runParallel(t, newTarget, []suiteCase{
		{"SQLInsertArrivesIntact", sqlInsertArrives},
		{"BadDestinationGoesDead", badDestinationGoesDead},
		{"SealedArrives", sealedArrives},
	})
}

// relayConfig routes every topic to p as relaytest.Config does, with each
// publish bounded to 5 s.
func relayConfig(p outbox.Publisher) *outbox.RelayConfig {
	cfg := relaytest.Config(p)
	cfg.PublishTimeout = 5 * time.Second
	return cfg
}

// sqlInsertArrives: rows inserted with plain SQL, as a producer in any
// language would, reach the destination with their ids, keys, headers
// and payloads byte for byte, and nothing else in their headers.
func sqlInsertArrives(t *testing.T, tg *Target) {
	db := testdb.New(t, store.Postgres)
	topic := tg.NewDestination(t)
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, 'order-42', '{"order_id":42}')`, topic)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ($1, 'plain text', $2)`, topic,
		`{"content-type":"text/plain","x-tenant":"acme","traceparent":"`+traceParent+`"}`)
	ids := map[string]string{} // payload → message_id
	rows, err := db.Pool.Query(context.Background(), `SELECT payload, message_id::text FROM outbox_messages`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var payload, id string
		if err := rows.Scan(&payload, &id); err != nil {
			t.Fatal(err)
		}
		ids[payload] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	relaytest.Start(t, db, relayConfig(tg.Publisher))

	want := map[string]struct {
		key     string
		headers map[string]string
	}{
		`{"order_id":42}`: {"order-42", map[string]string{publisher.HeaderTopic: topic, publisher.HeaderBusinessKey: "order-42", publisher.HeaderContentType: "application/json"}},
		"plain text": {"", map[string]string{publisher.HeaderTopic: topic, publisher.HeaderContentType: "text/plain",
			"x-tenant": "acme", publisher.HeaderTraceParent: traceParent}},
	}
	got := map[string]publishertest.Received{}
	for _, r := range tg.Receive(t, topic, 2) {
		got[string(r.Payload)] = r
	}
	for payload, w := range want {
		r, ok := got[payload]
		if !ok {
			t.Fatalf("payload %q did not arrive byte for byte; got %v", payload, got)
		}
		checkReceived(t, tg, r, ids[payload], w.key, w.headers)
	}
	relaytest.WaitFor(t, 10*time.Second, "both rows marked sent", func() bool { return relaytest.Count(t, db, "sent") == 2 })
}

// checkReceived checks one arrival against its row: id, key, the headers
// wanted, and no header beyond them but the one carrying the id.
func checkReceived(t *testing.T, tg *Target, r publishertest.Received, id, key string, headers map[string]string) {
	t.Helper()
	if r.ID != id {
		t.Errorf("%q: id %q, want %q", r.Payload, r.ID, id)
	}
	if tg.Features.Keys && r.Key != key {
		t.Errorf("%q: key %q, want %q", r.Payload, r.Key, key)
	}
	if r.Topic != headers[publisher.HeaderTopic] {
		t.Errorf("%q: topic %q, want %q", r.Payload, r.Topic, headers[publisher.HeaderTopic])
	}
	for k, v := range headers {
		if k == "x-tenant" && !tg.Features.ArbitraryHeaders {
			continue
		}
		if got, ok := r.Headers[k]; !ok || got != v {
			t.Errorf("%q: header %s = %q, want %q", r.Payload, k, got, v)
		}
	}
	for k, v := range r.Headers {
		if _, ok := headers[k]; !ok && v != id {
			t.Errorf("%q: unexpected header %s = %q", r.Payload, k, v)
		}
	}
}

// badDestinationGoesDead: of rows inserted with plain SQL, in batches
// shared with messages for a healthy destination, those for each bad
// destination go dead after one attempt, never marked sent, with the
// reason in last_error; the healthy ones are sent and arrive.
func badDestinationGoesDead(t *testing.T, tg *Target) {
	if tg.BadDestinations == nil {
		t.Skip("the broker has no destination that refuses a message")
	}
	db := testdb.New(t, store.Postgres)
	good := tg.NewDestination(t)
	bad := tg.BadDestinations(t)
	// Plain SQL: a bad destination may be a topic the producer refuses.
	var goodIDs []string
	total := 0
	for i, b := range bad {
		for j := range 2 {
			for _, topic := range []string{good, b.Topic} {
				var id string
				if err := db.Pool.QueryRow(context.Background(), `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, $2, $3) RETURNING message_id::text`,
					topic, fmt.Sprint("k", i, j), fmt.Sprintf(`{"n":%d}`, 2*i+j)).Scan(&id); err != nil {
					t.Fatal(err)
				}
				if topic == good {
					goodIDs = append(goodIDs, id)
				}
				total++
			}
		}
	}
	var sent atomic.Int64
	cfg := relayConfig(tg.Publisher)
	cfg.OnBatch = func(r outbox.BatchReport) { sent.Add(int64(r.Sent)) }
	relaytest.Start(t, db, cfg)
	relaytest.WaitFor(t, 30*time.Second, "every message settled", func() bool {
		return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE "+db.Status()+" IN ('sent', 'dead')") == total
	})

	healthy := 2 * len(bad)
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = $1 AND status = 'sent'", good); n != healthy {
		t.Errorf("%d messages for %s sent, want %d", n, good, healthy)
	}
	if got := sent.Load(); got != int64(healthy) {
		t.Errorf("the relay reported %d messages sent, want %d", got, healthy)
	}
	for _, b := range bad {
		checkDead(t, db, b)
	}
	arrived := map[string]bool{}
	for _, r := range tg.Receive(t, good, healthy) {
		arrived[r.ID] = true
	}
	for _, id := range goodIDs {
		if !arrived[id] {
			t.Errorf("message %s for %s is sent but never arrived", id, good)
		}
	}
}

// checkDead checks that b's messages went dead after one attempt, never
// sent, saying why.
func checkDead(t *testing.T, db *testdb.DB, b BadDestination) {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), "SELECT status, attempts, sent_at IS NULL, coalesce(last_error, '') FROM outbox_messages WHERE topic = $1", b.Topic)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		var status, lastErr string
		var attempts int
		var neverSent bool
		if err := rows.Scan(&status, &attempts, &neverSent, &lastErr); err != nil {
			t.Fatal(err)
		}
		if status != "dead" || attempts != 1 || !neverSent {
			t.Errorf("%s: status %s after %d attempts (never sent: %v; %s), want dead after 1, never sent", b.Topic, status, attempts, neverSent, lastErr)
		}
		if b.LastError != "" && lastErr != b.LastError {
			t.Errorf("%s: last_error %q, want %q", b.Topic, lastErr, b.LastError)
		}
		for _, s := range b.Says {
			if !strings.Contains(lastErr, s) {
				t.Errorf("%s: last_error %q does not say %q", b.Topic, lastErr, s)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%s: %d rows, want 2", b.Topic, n)
	}
	if b.Check != nil {
		b.Check(t)
	}
}

// RunCrash runs the crash end-to-end test (see relaytest.Crash) on each
// of dialects (PostgreSQL when none is given): plain SQL inserts, an
// `outbox relay` process at tg.URL killed mid-stream three times, and
// Consume applying every delivery through an inbox on the same database,
// each message exactly once.
func RunCrash(t *testing.T, newTarget func(t *testing.T) *Target, dialects ...store.Dialect) {
	t.Helper()
	if len(dialects) == 0 {
		dialects = []store.Dialect{store.Postgres}
	}
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t)
			if tg.URL == "" {
				t.Fatal("Target.URL is required")
			}
			topic := tg.NewDestination(t)
			c := relaytest.NewCrash(t, testdb.New(t, d), topic)
			tg.Consume(t, topic, c.Handle)
			c.Run(tg.URL)
		})
	}
}
