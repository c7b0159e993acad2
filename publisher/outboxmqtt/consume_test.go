package outboxmqtt_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

const testTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// consumeConfig is a consumer of filter on the shared broker with a fresh
// client id, a short session and quick retries.
func consumeConfig(addr, filter string) *outboxmqtt.ConsumeConfig {
	return &outboxmqtt.ConsumeConfig{
		Server:        "mqtt://" + addr,
		ClientID:      "outbox-test-consume-" + randomHex(6),
		Filter:        filter,
		SessionExpiry: time.Minute,
		RetryDelay:    50 * time.Millisecond,
		Logger:        relaytest.Logger(),
	}
}

// runConsume runs Consume until the test ends (or stop is called), checks
// it returned nil, and returns once the subscription is in place.
func runConsume(t testing.TB, cfg *outboxmqtt.ConsumeConfig, h func(context.Context, *inbox.Message) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	subscribed := make(chan struct{}, 1)
	cfg.OnSubscribed = func() {
		select {
		case subscribed <- struct{}{}:
		default:
		}
	}
	done := make(chan error, 1)
	go func() { done <- outboxmqtt.Consume(ctx, cfg, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Consume: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Consume did not return within 10s of ctx ending")
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-subscribed:
	case err := <-done:
		t.Fatalf("Consume returned before subscribing: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("Consume did not subscribe within 15s")
	}
	return stop
}

// rawPublish sends one QoS 1 PUBLISH that is not from the outbox.
func rawPublish(t *testing.T, addr, topic string, payload []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{{Scheme: "mqtt", Host: addr}},
		CleanStartOnInitialConnection: true,
		ClientConfig:                  paho.ClientConfig{ClientID: "outbox-test-raw-" + randomHex(4)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cm.Disconnect(context.Background()) }()
	if err := cm.AwaitConnection(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cm.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: payload}); err != nil {
		t.Fatal(err)
	}
}

// TestConsumeDecodes: a message the Publisher sent reaches the handler
// with its id, topic, key, headers, payload and the producer's trace; a
// PUBLISH without a message id is acknowledged and skipped.
func TestConsumeDecodes(t *testing.T) {
	t.Parallel()
	requireBroker(t)
	prefix := "consume" + randomHex(5)
	got := make(chan *inbox.Message, 2)
	traces := make(chan string, 2)
	runConsume(t, consumeConfig(brokerAddr, prefix+"/#"), func(ctx context.Context, m *inbox.Message) error {
		traces <- trace.SpanContextFromContext(ctx).TraceID().String()
		got <- m
		return nil
	})
	rawPublish(t, brokerAddr, prefix+"/raw", []byte("not from the outbox"))
	env := publishertest.Envelope(prefix+".order.created", "order-42", []byte(`{"order_id":42}`), "application/json",
		map[string]string{"x-tenant": "acme", outbox.HeaderTraceParent: testTrace})
	if errs := publish(dial(t, brokerAddr, nil), 10*time.Second, env); errs[0] != nil {
		t.Fatal(errs[0])
	}
	var m *inbox.Message
	select {
	case m = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("no message consumed within 15s")
	}
	if m.ID != env.ID || m.Topic != env.Headers[outbox.HeaderTopic] || m.Key != "order-42" || m.ContentType != "application/json" ||
		string(m.Payload) != `{"order_id":42}` {
		t.Errorf("decoded %+v, want the envelope %+v", m, env)
	}
	for k, v := range env.Headers {
		if m.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, m.Headers[k], v)
		}
	}
	if tr := <-traces; tr != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("handler's trace id %q, want the producer's", tr)
	}
	select {
	case m := <-got:
		t.Errorf("a second message reached the handler: %+v", m)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	p := &paho.Publish{QoS: 1, Topic: "order/created", Payload: []byte("x"), Properties: &paho.PublishProperties{
		ContentType: "text/plain",
		User:        paho.UserProperties{{Key: "message-id", Value: "id-1"}, {Key: "X-Tenant", Value: "acme"}, {Key: "x-tenant", Value: "other"}},
	}}
	m, err := outboxmqtt.Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	// Without outbox-topic and content-type properties, the MQTT topic and
	// Content Type stand in; the first of a repeated name wins.
	if m.ID != "id-1" || m.Topic != "order/created" || m.ContentType != "text/plain" || m.Key != "" || m.Headers["x-tenant"] != "acme" {
		t.Errorf("decoded %+v", m)
	}
	for _, p := range []*paho.Publish{{Topic: "a/b"}, {Topic: "a/b", Properties: &paho.PublishProperties{User: paho.UserProperties{{Key: "message-id"}}}}} {
		if _, err := outboxmqtt.Decode(p); !errors.Is(err, outboxmqtt.ErrNoMessageID) || !strings.Contains(err.Error(), `"a/b"`) {
			t.Errorf("Decode without an id: %v, want ErrNoMessageID naming the topic", err)
		}
	}
}

func TestConsumeConfigErrors(t *testing.T) {
	t.Parallel()
	h := func(context.Context, *inbox.Message) error { return nil }
	for _, c := range []struct {
		cfg  *outboxmqtt.ConsumeConfig
		want string
	}{
		{nil, "nil ConsumeConfig"},
		{&outboxmqtt.ConsumeConfig{ClientID: "c", Filter: "a/#"}, "ConsumeConfig.Server is required"},
		{&outboxmqtt.ConsumeConfig{Server: "mqtt://u:secret@h", ClientID: "c", Filter: "a/#"}, "not in the URL"},
		{&outboxmqtt.ConsumeConfig{Server: "mqtt://h", Filter: "a/#"}, "ConsumeConfig.ClientID is required"},
		{&outboxmqtt.ConsumeConfig{Server: "mqtt://h", ClientID: "c"}, "ConsumeConfig.Filter is required"},
		{&outboxmqtt.ConsumeConfig{Server: "mqtt://h", ClientID: "c", Filter: "a/#", SessionExpiry: time.Millisecond}, "SessionExpiry must be at least 1s"},
		{&outboxmqtt.ConsumeConfig{Server: "mqtt://h", ClientID: "c", Filter: "a/#", RetryDelay: -time.Second}, "must not be negative"},
	} {
		err := outboxmqtt.Consume(context.Background(), c.cfg, h)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%+v: %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
}

// TestConsumeResumesSession: messages published while the consumer is
// away wait in its persistent session and arrive when it comes back.
func TestConsumeResumesSession(t *testing.T) {
	t.Parallel()
	requireBroker(t)
	prefix := "resume" + randomHex(5)
	cfg := consumeConfig(brokerAddr, prefix+"/#")
	got := make(chan string, 4)
	h := func(_ context.Context, m *inbox.Message) error { got <- m.ID; return nil }
	stop := runConsume(t, cfg, h)
	stop()
	env := publishertest.Envelope(prefix+".later", "", []byte(`{}`), "application/json", nil)
	if errs := publish(dial(t, brokerAddr, nil), 10*time.Second, env); errs[0] != nil {
		t.Fatal(errs[0])
	}
	runConsume(t, cfg, h)
	select {
	case id := <-got:
		if id != env.ID {
			t.Fatalf("got %s, want %s", id, env.ID)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the message published while the consumer was away never arrived")
	}
}

// TestConsumeRedeliversAfterHandlerError: a handler that fails after
// writing its effect leaves nothing applied; Consume reconnects, the
// broker redelivers, and the effect is applied once.
func TestConsumeRedeliversAfterHandlerError(t *testing.T) {
	t.Parallel()
	requireBroker(t)
	db := testdb.New(t, store.Postgres)
	ib := relaytest.Effects(t, db, "inventory")
	prefix := "redeliver" + randomHex(5)
	var mu sync.Mutex
	calls := 0
	runConsume(t, consumeConfig(brokerAddr, prefix+"/#"), func(ctx context.Context, m *inbox.Message) error {
		_, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error {
			if err := relaytest.InsertEffect(ctx, tx, m); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 1 {
				return errors.New("simulated failure after the effect")
			}
			return nil
		})
		return err
	})
	env := publishertest.Envelope(prefix+".t", "", []byte(`{}`), "application/json", nil)
	if errs := publish(dial(t, brokerAddr, nil), 10*time.Second, env); errs[0] != nil {
		t.Fatal(errs[0])
	}
	relaytest.WaitFor(t, 15*time.Second, "the effect applied", func() bool {
		return db.Count(t, `SELECT count(*) FROM effects WHERE message_id = $1`, env.ID) == 1
	})
	mu.Lock()
	if calls != 2 {
		t.Errorf("effect ran %d times, want 2 (one failed, one applied)", calls)
	}
	mu.Unlock()
}

// TestConsumeEndToEnd: plain SQL inserts → relay → Consume through a real
// inbox. Every message is delivered at least twice (the first delivery's
// effect commits but the handler then fails, as if the ack were lost, and
// the reconnection brings it back), and each is applied exactly once.
func TestConsumeEndToEnd(t *testing.T) {
	t.Parallel()
	requireBroker(t)
	db := testdb.New(t, store.Postgres)
	ib := relaytest.Effects(t, db, "inventory")
	prefix := "consume" + randomHex(5)
	topic := prefix + ".order"
	handler, twice := relaytest.LostAcks(func(ctx context.Context, m *inbox.Message) error {
		if m.Topic != topic || trace.SpanContextFromContext(ctx).TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("message %s: topic %q, trace %v", m.ID, m.Topic, trace.SpanContextFromContext(ctx).TraceID())
		}
		_, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error { return relaytest.InsertEffect(ctx, tx, m) })
		return err
	})
	runConsume(t, consumeConfig(brokerAddr, prefix+"/#"), handler)
	const n = 20
	for i := range n {
		db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES ($1, $2, $3, $4)`,
			topic, fmt.Sprintf("key-%d", i%3), fmt.Sprintf(`{"seq":%d}`, i), `{"traceparent":"`+testTrace+`"}`)
	}
	relaytest.Start(t, db, relayConfig(dial(t, brokerAddr, nil)))
	relaytest.WaitFor(t, 30*time.Second, "every message delivered twice", func() bool { return twice() == n })
	relaytest.CheckEffects(t, db, n)
}
