package outboxredis_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// TestEndToEnd: a plain SQL insert, as any language would do it, reaches a
// consumer group reading the stream, with its id, key, headers and payload.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	topic := streamName(t, admin, "e2e")
	createStream(t, admin, topic)
	db := testdb.New(t, store.Postgres)
	p, err := outboxurl.Open("redis://"+redisAddr+"/0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	relaytest.Start(t, db, &outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "outboxtest.>", Publisher: p}}, MaxPollInterval: 100 * time.Millisecond})

	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES ($1, 'order-42', '{"order_id":42}', $2)`,
		topic, `{"x-tenant":"acme","traceparent":"`+trace+`"}`)
	var id string
	if err := db.SQL.QueryRow(`SELECT message_id FROM outbox_messages WHERE topic = $1`, topic).Scan(&id); err != nil {
		t.Fatal(err)
	}

	// A real consumer: XREADGROUP in the operator's group, then XACK.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "consumers", Consumer: "c1", Streams: []string{topic, ">"}, Count: 10, Block: 20 * time.Second}).Result()
	if err != nil {
		t.Fatalf("XREADGROUP: %v", err)
	}
	if len(res) != 1 || len(res[0].Messages) != 1 {
		t.Fatalf("XREADGROUP returned %+v, want one entry", res)
	}
	m := res[0].Messages[0]
	got := decode(t, topic, m)
	if got.ID != id || got.Topic != topic || got.Key != "order-42" || string(got.Payload) != `{"order_id":42}` {
		t.Errorf("received %+v (payload %s), want id %s", got.Received, got.Payload, id)
	}
	want := map[string]string{"outbox-topic": topic, "outbox-business-key": "order-42", "content-type": "application/json", "traceparent": trace, "x-tenant": "acme"}
	if fmt.Sprint(got.Headers) != fmt.Sprint(want) {
		t.Errorf("headers %v, want %v", got.Headers, want)
	}
	if err := admin.XAck(ctx, topic, "consumers", m.ID).Err(); err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 10*time.Second, "every row sent", func() bool {
		return db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status <> 'sent'`) == 0
	})
}

// TestRelayDeadLetters: a key that is not a stream and a stream that does
// not exist send their messages dead at the first attempt with the
// reason, while the healthy stream's message is delivered.
func TestRelayDeadLetters(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	ok := streamName(t, admin, "ok")
	createStream(t, admin, ok)
	wrong := streamName(t, admin, "wrongtype")
	mustDo(t, admin, "SET", wrong, "a string")
	missing := streamName(t, admin, "missing")
	db := testdb.New(t, store.Postgres)
	p, err := outboxurl.Open("redis://"+redisAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	if _, err := relaytest.NewEnqueuer(t, db).Enqueue(ctx, []outbox.Message{
		{Topic: ok, Key: "a", Payload: []byte(`1`)},
		{Topic: wrong, Key: "b", Payload: []byte(`2`)},
		{Topic: missing, Key: "c", Payload: []byte(`3`)},
	}); err != nil {
		t.Fatal(err)
	}
	relaytest.Start(t, db, &outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "*", Publisher: p}}, MaxPollInterval: 100 * time.Millisecond})
	relaytest.WaitFor(t, 20*time.Second, "no pending rows", func() bool { return relaytest.Count(t, db, "pending") == 0 })

	for _, tc := range []struct {
		topic, status string
		says          []string
	}{
		{ok, "sent", nil},
		{wrong, "dead", []string{"WRONGTYPE", "not a stream", wrong}},
		{missing, "dead", []string{"does not exist", "create=true", missing}},
	} {
		var status, lastErr string
		var attempts int
		if err := db.SQL.QueryRow(`SELECT status, attempts, coalesce(last_error, '') FROM outbox_messages WHERE topic = $1`, tc.topic).Scan(&status, &attempts, &lastErr); err != nil {
			t.Fatal(err)
		}
		if status != tc.status || attempts != 1 {
			t.Errorf("%s: status %s after %d attempts (%s), want %s after 1", tc.topic, status, attempts, lastErr, tc.status)
		}
		for _, s := range tc.says {
			if !strings.Contains(lastErr, s) {
				t.Errorf("%s: last_error %q does not say %q", tc.topic, lastErr, s)
			}
		}
	}
	if n := len(readAll(t, admin, ok)); n != 1 {
		t.Errorf("%s holds %d entries, want 1", ok, n)
	}
	if typ, _ := admin.Type(ctx, wrong).Result(); typ != "string" {
		t.Errorf("%s became a %s", wrong, typ)
	}
	if n, _ := admin.Exists(ctx, missing).Result(); n != 0 {
		t.Errorf("the relay created %s", missing)
	}
}

// TestRelayOutage: a relay delivers a flow of 600 messages to a Redis of
// the test's own that is killed (SIGKILL) mid-flow and kept down for 10 s,
// then restarted on the same port and data directory. Every message ends
// up in the stream, none dead, none sent that is not there, each key in
// order, and the outage did not eat attempts.
func TestRelayOutage(t *testing.T) {
	t.Parallel()
	// appendfsync always: a confirmed entry is on disk, so it survives the
	// kill (see docs/brokers/redis.md on what a confirmation means).
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	admin := srv.client(t, nil)
	const stream = "orders"
	createStream(t, admin, stream)

	db := testdb.New(t, store.Postgres)
	pub := newPublisher(t, srv.client(t, nil), nil)
	var deferred, retried atomic.Int64
	relaytest.Start(t, db, &outbox.RelayConfig{
		Routes:          []outbox.Route{{Pattern: "order.*", Publisher: pub, Destination: stream}},
		BatchSize:       50,
		LeaseTTL:        2 * time.Second,
		MaxPollInterval: 100 * time.Millisecond,
		// Fast retries: had the outage counted as failed attempts, the
		// messages would reach max attempts (10) and go dead well within
		// the 10 s outage.
		Retry: outbox.RetryPolicy{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond},
		OnBatch: func(r outbox.BatchReport) {
			deferred.Add(int64(r.Deferred))
			retried.Add(int64(r.Retried))
		},
	})

	const total, perTx, keys = 600, 15, 25
	enq := relaytest.NewEnqueuer(t, db)
	produced := enq.Flow("order.created", total, perTx, keys, 400*time.Millisecond) // a steady flow across the outage

	waitEntries(t, admin, stream, 60, 30*time.Second)
	srv.kill()
	down := time.Now()
	t.Logf("redis-server killed with %d of %d messages enqueued", db.Count(t, `SELECT count(*) FROM outbox_messages`), total)
	time.Sleep(10 * time.Second) // the outage
	if n := relaytest.Count(t, db, "dead"); n != 0 {
		t.Fatalf("%d messages dead during the outage", n)
	}
	srv.start()
	t.Logf("redis-server back after %v", time.Since(down).Round(time.Millisecond))

	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 90*time.Second, "every message sent", func() bool {
		return db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status <> 'sent'`) == 0
	})

	got := readAll(t, admin, stream)
	inStream := map[string]int{}
	var order relaytest.KeyOrder // judged on first arrivals
	for _, e := range got {
		inStream[e.ID]++
		order.Check(t, e.ID, e.Payload)
	}
	ids := enq.IDs()
	for _, id := range ids {
		if inStream[id] == 0 {
			t.Errorf("message %s is marked sent but is not in the stream", id)
		}
	}
	if len(inStream) != total || len(ids) != total {
		t.Errorf("%d distinct ids in the stream, %d enqueued; want %d", len(inStream), len(ids), total)
	}
	if n := relaytest.Count(t, db, "dead"); n != 0 {
		t.Errorf("%d messages dead", n)
	}
	var maxAttempts int
	if err := db.SQL.QueryRow(`SELECT max(attempts) FROM outbox_messages`).Scan(&maxAttempts); err != nil {
		t.Fatal(err)
	}
	// One attempt, or two for a message caught in flight by the kill; the
	// outage itself must not count.
	if maxAttempts > 2 {
		t.Errorf("a message took %d attempts: the outage was counted against it", maxAttempts)
	}
	if deferred.Load() == 0 {
		t.Errorf("the relay never deferred a message as unavailable: was the outage noticed?")
	}
	t.Logf("%d entries for %d messages (%d redelivered); %d deferred and %d retried publishes; max attempts %d",
		len(got), total, len(got)-len(inStream), deferred.Load(), retried.Load(), maxAttempts)
}
