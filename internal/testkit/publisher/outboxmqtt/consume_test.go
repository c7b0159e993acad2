package outboxmqtt_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

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
	subscribed := make(chan struct{}, 1)
	cfg.OnSubscribed = func() {
		select {
		case subscribed <- struct{}{}:
		default:
		}
	}
	stop = relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error { return outboxmqtt.Consume(ctx, cfg, h) })
	select {
	case <-subscribed:
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
