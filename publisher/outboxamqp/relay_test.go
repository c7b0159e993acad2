package outboxamqp_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
)

// relayConfig routes every topic to p as relaytest.Config does, but
// bounds each publish to 5 s and backs off from 100 ms up to 1 s.
func relayConfig(p outbox.Publisher) *outbox.RelayConfig {
	cfg := relaytest.Config(p)
	cfg.PublishTimeout = 5 * time.Second
	cfg.Retry = outbox.RetryPolicy{Base: 100 * time.Millisecond, Cap: time.Second}
	return cfg
}

// TestRelayUnroutableIsNeverSent: through a real relay, a message whose
// routing key no queue is bound to ends dead with the broker's reason and
// is never marked sent, while the routable messages of the same batches
// are sent.
func TestRelayUnroutableIsNeverSent(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	bound, unbound := randomName("routable."), randomName("unroutable.")
	c := consume(t, outboxamqp.DefaultExchange, bound)
	p := newPublisher(t, rabbitURL, nil)
	var msgs []outbox.Message
	for i := range 10 {
		topic := bound
		if i%2 == 1 {
			topic = unbound
		}
		msgs = append(msgs, outbox.Message{Topic: topic, Key: fmt.Sprint("k", i), Payload: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	if _, err := relaytest.NewEnqueuer(t, db).Enqueue(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}

	var sent atomic.Int64
	cfg := relayConfig(p)
	cfg.OnBatch = func(r outbox.BatchReport) { sent.Add(int64(r.Sent)) }
	relaytest.Start(t, db, cfg)
	relaytest.WaitFor(t, 30*time.Second, "every message settled", func() bool {
		return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status IN ('sent', 'dead')") == 10
	})
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = $1 AND status = 'sent'", bound); n != 5 {
		t.Errorf("%d routable messages sent, want 5", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = $1 AND status = 'dead' AND sent_at IS NULL AND attempts = 1", unbound); n != 5 {
		t.Errorf("%d unroutable messages dead after one attempt and never sent, want 5", n)
	}
	if got := sent.Load(); got != 5 {
		t.Errorf("the relay reported %d messages sent, want 5", got)
	}
	rows, err := db.Pool.Query(context.Background(), "SELECT last_error FROM outbox_messages WHERE topic = $1", unbound)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := fmt.Sprintf(`unroutable: no queue bound to exchange "amq.topic" with routing key %q`, unbound)
	for rows.Next() {
		var lastErr string
		if err := rows.Scan(&lastErr); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(lastErr, want) {
			t.Errorf("last_error %q, want it to contain %q", lastErr, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.waitN(t, 5, 20*time.Second) {
		if d.RoutingKey != bound {
			t.Errorf("consumer got routing key %q", d.RoutingKey)
		}
	}
}

// TestRelayOutage: the broker becomes unreachable (every connection cut
// and refused at a TCP proxy; the shared RabbitMQ itself keeps running)
// for 10 s while 600 messages flow through a real relay. Afterwards every
// message has arrived, none is dead, every message marked sent arrived,
// the outage did not burn attempts, and each key's messages first arrived
// in order.
func TestRelayOutage(t *testing.T) {
	t.Parallel()
	const total, keys, perTx = 600, 20, 4
	db := testdb.New(t, store.Postgres)
	proxy, err := faultproxy.New(rabbitAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	topic := randomName("outage.")
	c := consume(t, outboxamqp.DefaultExchange, topic)
	p := newPublisher(t, viaAddr(t, proxy.Addr()), &outboxamqp.Config{DialTimeout: 2 * time.Second})
	var deferred atomic.Int64
	cfg := relayConfig(p)
	cfg.OnBatch = func(r outbox.BatchReport) { deferred.Add(int64(r.Deferred)) }
	relaytest.Start(t, db, cfg)

	// A steady flow across the outage.
	produced := relaytest.NewEnqueuer(t, db).Flow(topic, total, perTx, keys, 100*time.Millisecond)
	relaytest.WaitFor(t, 30*time.Second, "the flow to start", func() bool { return c.distinct() >= 100 })
	proxy.SetMode(faultproxy.Refuse)
	outageAt := c.distinct()
	time.Sleep(10 * time.Second) // the outage
	duringOutage := c.distinct()
	proxy.SetMode(faultproxy.Pass)
	if err := <-produced; err != nil {
		t.Error(err)
	}
	if duringOutage != outageAt {
		t.Logf("%d messages arrived while the connection was being cut", duringOutage-outageAt)
	}
	if outageAt >= total {
		t.Fatal("the flow ended before the outage began")
	}
	if deferred.Load() == 0 {
		t.Fatal("the relay never found the broker unavailable: no outage happened")
	}

	relaytest.WaitFor(t, 120*time.Second, fmt.Sprintf("all %d messages at the consumer", total), func() bool { return c.distinct() == total })
	relaytest.WaitFor(t, 30*time.Second, "every row settled", func() bool {
		return relaytest.Count(t, db, "pending") == 0
	})
	if n := relaytest.Count(t, db, "dead"); n != 0 {
		t.Errorf("%d messages dead after the outage", n)
	}
	if maxAttempts := db.Count(t, "SELECT max(attempts) FROM outbox_messages"); maxAttempts > 3 {
		t.Errorf("a message took %d attempts: the outage burned attempts", maxAttempts)
	}
	t.Logf("attempts: %d in all for %d messages; %d deliveries (duplicates are allowed)",
		db.Count(t, "SELECT sum(attempts) FROM outbox_messages"), total, len(c.deliveries()))

	sentIDs := relaytest.SentIDs(t, db)
	for _, id := range sentIDs {
		if !c.has(id) {
			t.Errorf("message %s is marked sent but never arrived", id)
		}
	}
	if len(sentIDs) != total {
		t.Errorf("%d rows sent, want %d", len(sentIDs), total)
	}

	var order relaytest.KeyOrder
	for _, d := range c.deliveries() {
		order.Check(t, d.MessageId, d.Body)
	}
}

// TestEndToEndSQLInsert: rows inserted by plain SQL, as any producer in
// any language would, reach a real consumer through the relay with the
// wire format of the contract.
func TestEndToEndSQLInsert(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	topic := randomName("order") + ".created"
	c := consume(t, outboxamqp.DefaultExchange, topic)
	p := newPublisher(t, rabbitURL, nil)
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, 'order-42', '{"order_id":42}')`, topic)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ($1, '{"order_id":43}', '{"x-tenant":"acme","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}')`, topic)
	ids := map[string]string{}
	rows, err := db.Pool.Query(context.Background(), "SELECT message_id, payload FROM outbox_messages")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, payload string
		if err := rows.Scan(&id, &payload); err != nil {
			t.Fatal(err)
		}
		ids[payload] = id
	}
	rows.Close()
	relaytest.Start(t, db, relayConfig(p))

	got := map[string]amqp.Delivery{}
	for _, d := range c.waitN(t, 2, 30*time.Second) {
		got[string(d.Body)] = d
	}
	for payload, id := range ids {
		d, ok := got[payload]
		if !ok {
			t.Fatalf("payload %s did not arrive byte for byte; got %v", payload, got)
		}
		if d.MessageId != id || d.Exchange != outboxamqp.DefaultExchange || d.RoutingKey != topic {
			t.Errorf("message_id %q exchange %q routing key %q; want %q, amq.topic, %q", d.MessageId, d.Exchange, d.RoutingKey, id, topic)
		}
		if d.DeliveryMode != amqp.Persistent || d.ContentType != "application/json" || d.Type != topic || d.AppId != outboxamqp.AppID || d.Timestamp.IsZero() {
			t.Errorf("properties: delivery mode %d, content type %q, type %q, app id %q, timestamp %v", d.DeliveryMode, d.ContentType, d.Type, d.AppId, d.Timestamp)
		}
		h := received(d).Headers
		if h[outbox.HeaderTopic] != topic || h[outbox.HeaderContentType] != "application/json" {
			t.Errorf("headers %v", h)
		}
		if _, ok := h["message-id"]; ok {
			t.Errorf("the id is repeated as a header: %v", h)
		}
	}
	if h := received(got[`{"order_id":42}`]).Headers; h[outbox.HeaderBusinessKey] != "order-42" {
		t.Errorf("business key header = %q", h[outbox.HeaderBusinessKey])
	}
	h := received(got[`{"order_id":43}`]).Headers
	if _, ok := h[outbox.HeaderBusinessKey]; ok || h["x-tenant"] != "acme" || !strings.HasPrefix(h[outbox.HeaderTraceParent], "00-4bf92f35") {
		t.Errorf("headers of the keyless message: %v", h)
	}
	relaytest.WaitFor(t, 10*time.Second, "both rows marked sent", func() bool {
		return relaytest.Count(t, db, "sent") == 2
	})
}
