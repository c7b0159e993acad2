package outboxkafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
)

// TestEndToEnd: a row inserted with plain SQL, as any producer in any
// language would, reaches a Kafka consumer through the relay with its id,
// key, headers and payload.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	db := postgres(t)
	c := newCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(4, "order.created"))
	relaytest.Start(t, db, relayConfig(dial(t, c)))

	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('order.created', 'order-42', '{"order_id":42}')`)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ('order.created', '{"order_id":43}', '{"x-tenant":"acme","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}')`)
	var id42, id43 string
	if err := db.Pool.QueryRow(t.Context(), `SELECT message_id FROM outbox_messages WHERE business_key = 'order-42'`).Scan(&id42); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(t.Context(), `SELECT message_id FROM outbox_messages WHERE business_key IS NULL`).Scan(&id43); err != nil {
		t.Fatal(err)
	}

	recs := newConsumer(t, c.ListenAddrs(), "order.created").readN(t, 2, 30*time.Second)
	byID := map[string]map[string]string{}
	for _, r := range recs {
		h := headers(r)
		byID[h[outboxkafka.HeaderMessageID]] = h
		switch h[outboxkafka.HeaderMessageID] {
		case id42:
			if string(r.Key) != "order-42" || string(r.Value) != `{"order_id":42}` {
				t.Errorf("order 42: key %q value %q", r.Key, r.Value)
			}
		case id43:
			if r.Key != nil || string(r.Value) != `{"order_id":43}` {
				t.Errorf("order 43: key %q (want none) value %q", r.Key, r.Value)
			}
		default:
			t.Errorf("unexpected record with headers %v", h)
		}
		if r.Headers[0].Key != outboxkafka.HeaderMessageID {
			t.Errorf("first header is %q, want %s", r.Headers[0].Key, outboxkafka.HeaderMessageID)
		}
	}
	want := map[string]map[string]string{
		id42: {outbox.HeaderTopic: "order.created", outbox.HeaderBusinessKey: "order-42", outbox.HeaderContentType: "application/json"},
		id43: {outbox.HeaderTopic: "order.created", outbox.HeaderContentType: "application/json", "x-tenant": "acme",
			outbox.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	for id, hs := range want {
		got, ok := byID[id]
		if !ok {
			t.Fatalf("message %s did not arrive", id)
		}
		for k, v := range hs {
			if got[k] != v {
				t.Errorf("message %s: header %s = %q, want %q", id, k, got[k], v)
			}
		}
		if id == id43 {
			if _, ok := got[outbox.HeaderBusinessKey]; ok {
				t.Errorf("message without a key carries %s", outbox.HeaderBusinessKey)
			}
		}
	}
	relaytest.WaitFor(t, 10*time.Second, "both rows marked sent", func() bool {
		return relaytest.Count(t, db, "sent") == 2
	})
}
