package outboxmqtt_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
)

// relayConfig routes every topic to p as relaytest.Config does, but backs
// off up to 500 ms.
func relayConfig(p outbox.Publisher) *outbox.RelayConfig {
	cfg := relaytest.Config(p)
	cfg.Retry.Cap = 500 * time.Millisecond
	return cfg
}

// TestEndToEnd: rows inserted with plain SQL reach a real MQTT consumer
// with their id, key, headers and payload.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	requireBroker(t)
	db := testdb.New(t, store.Postgres)
	prefix := "e2e" + randomHex(5)
	sub := subscribe(t, brokerAddr, prefix+"/#")
	p := dial(t, brokerAddr, nil)

	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, 'order-42', '{"order_id":42}')`, prefix+".order.created")
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ($1, 'plain text', $2)`, prefix+".note",
		`{"content-type":"text/plain","x-tenant":"acme","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)
	relaytest.Start(t, db, relayConfig(p))

	got := sub.wait(t, 2, 30*time.Second)
	byTopic := map[string]message{}
	for _, m := range got {
		byTopic[m.Destination] = m
	}
	type row struct{ id, topic, key string }
	rows, err := db.Pool.Query(context.Background(), `SELECT message_id::text, topic, coalesce(business_key, '') FROM outbox_messages ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var want []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.topic, &r.key); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	rows.Close()
	if len(want) != 2 {
		t.Fatalf("%d rows", len(want))
	}

	order := byTopic[prefix+"/order/created"]
	switch {
	case order.ID != want[0].id:
		t.Errorf("order: message-id %q, want %q (got %+v)", order.ID, want[0].id, got)
	case order.Key != "order-42" || order.Headers[outbox.HeaderBusinessKey] != "order-42":
		t.Errorf("order: key %q", order.Key)
	case order.Topic != prefix+".order.created":
		t.Errorf("order: outbox-topic %q", order.Topic)
	case order.ContentType != "application/json" || order.Headers["content-type"] != "application/json":
		t.Errorf("order: content type %q / %q", order.ContentType, order.Headers["content-type"])
	case !bytes.Equal(order.Payload, []byte(`{"order_id":42}`)):
		t.Errorf("order: payload %q", order.Payload)
	case order.QoS != 1:
		t.Errorf("order: QoS %d", order.QoS)
	}
	note := byTopic[prefix+"/note"]
	switch {
	case note.ID != want[1].id:
		t.Errorf("note: message-id %q, want %q", note.ID, want[1].id)
	case note.Key != "":
		t.Errorf("note: key %q, want none", note.Key)
	case note.ContentType != "text/plain" || note.Headers["x-tenant"] != "acme":
		t.Errorf("note: headers %v, content type %q", note.Headers, note.ContentType)
	case note.Headers[outbox.HeaderTraceParent] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":
		t.Errorf("note: traceparent %q", note.Headers[outbox.HeaderTraceParent])
	case string(note.Payload) != "plain text":
		t.Errorf("note: payload %q", note.Payload)
	}
	relaytest.WaitFor(t, 10*time.Second, "both rows to be marked sent", func() bool {
		return relaytest.Count(t, db, "sent") == 2
	})
}

// TestInvalidTopicGoesDead: a topic MQTT cannot carry, inserted with plain
// SQL, goes dead through a real relay with the reason in last_error, after
// one attempt; the route keeps delivering the rest.
func TestInvalidTopicGoesDead(t *testing.T) {
	t.Parallel()
	requireBroker(t)
	db := testdb.New(t, store.Postgres)
	prefix := "dead" + randomHex(5)
	sub := subscribe(t, brokerAddr, prefix+"/#")
	p := dial(t, brokerAddr, nil)
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, 'k1', '1')`, prefix+".sensor.+.temp")
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, 'k2', '2')`, prefix+".sensor.#")
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, 'k3', '3')`, prefix+".sensor.ok")
	relaytest.Start(t, db, relayConfig(p))

	relaytest.WaitFor(t, 30*time.Second, "two dead rows and one sent", func() bool {
		return relaytest.Count(t, db, "dead") == 2 &&
			relaytest.Count(t, db, "sent") == 1
	})
	rows, err := db.Pool.Query(context.Background(), `SELECT topic, attempts, coalesce(last_error, '') FROM outbox_messages WHERE status = 'dead'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var topic, lastErr string
		var attempts int
		if err := rows.Scan(&topic, &attempts, &lastErr); err != nil {
			t.Fatal(err)
		}
		if attempts != 1 || !strings.Contains(lastErr, "wildcard") || !strings.Contains(lastErr, outboxmqtt.Topic(topic)) {
			t.Errorf("dead %s after %d attempts: last_error %q; want one attempt and the reason", topic, attempts, lastErr)
		}
	}
	if got := sub.wait(t, 1, 10*time.Second); got[0].Destination != prefix+"/sensor/ok" {
		t.Fatalf("subscriber got %q", got[0].Destination)
	}
}
