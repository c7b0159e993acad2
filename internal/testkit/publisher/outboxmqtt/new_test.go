package outboxmqtt_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
)

// TestNewOverCallersConnection: a publisher over the caller's connection
// manager delivers, and its Close leaves that connection to the caller.
func TestNewOverCallersConnection(t *testing.T) {
	t.Parallel()
	requireBroker(t)
	dest := "new" + randomHex(4) + ".orders"
	sub := subscribe(t, brokerAddr, outboxmqtt.Topic(dest))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls:   []*url.URL{{Scheme: "mqtt", Host: brokerAddr}},
		KeepAlive:    30,
		ClientConfig: paho.ClientConfig{ClientID: "outbox-test-app-" + randomHex(4)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		_ = cm.Disconnect(dctx)
	}()
	if _, err := outboxmqtt.New(nil, nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
	if _, err := outboxmqtt.New(cm, &outboxmqtt.Config{MaxInFlight: -1}); err == nil {
		t.Fatal("New with a negative MaxInFlight succeeded")
	}
	p, err := outboxmqtt.New(cm, &outboxmqtt.Config{MaxInFlight: 20})
	if err != nil {
		t.Fatal(err)
	}
	var batch []*publisher.Envelope
	for _, k := range []string{"a", "b", "c"} {
		batch = append(batch, env(dest, k, `{"k":"`+k+`"}`))
	}
	for i, err := range publish(p, 20*time.Second, batch...) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if got := sub.wait(t, 3, 10*time.Second); len(got) != 3 || !sub.has(batch[0].ID) || !sub.has(batch[2].ID) {
		t.Fatalf("subscriber got %v", got)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cm.Publish(ctx, &paho.Publish{QoS: 1, Topic: outboxmqtt.Topic(dest), Payload: []byte(`after`)}); err != nil {
		t.Fatalf("the caller's connection does not work after the publisher's Close: %v", err)
	}
}
