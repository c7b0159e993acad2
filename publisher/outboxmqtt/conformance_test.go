package outboxmqtt_test

import (
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestConformance runs the publisher suite against the local Mosquitto,
// with a QoS 1 MQTT 5 subscriber per destination as the consumer. The
// publisher reaches the broker through a fault proxy, so that its
// connection can be cut; the subscribers connect directly.
func TestConformance(t *testing.T) {
	requireBroker(t)
	publishertest.Run(t, func(t *testing.T) *publishertest.Target {
		proxy, err := faultproxy.New(brokerAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		p := dial(t, proxy.Addr(), nil)
		subs := map[string]*subscriber{}
		return &publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				dest := "conf" + randomHex(6) + ".orders"
				subs[dest] = subscribe(t, brokerAddr, outboxmqtt.Topic(dest))
				return dest
			},
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				got := subs[dest].wait(t, n, 20*time.Second)
				out := make([]publishertest.Received, len(got))
				for i, m := range got {
					if m.Destination != outboxmqtt.Topic(dest) || m.QoS != 1 {
						t.Errorf("message %s arrived on %q at QoS %d, want %q at QoS 1", m.ID, m.Destination, m.QoS, outboxmqtt.Topic(dest))
					}
					if m.ContentType != m.Headers["content-type"] {
						t.Errorf("message %s: Content Type property %q, content-type user property %q", m.ID, m.ContentType, m.Headers["content-type"])
					}
					out[i] = m.Received
				}
				return out
			},
			Disconnect: func(*testing.T) func() {
				proxy.SetMode(faultproxy.Refuse)
				return func() { proxy.SetMode(faultproxy.Pass) }
			},
			Features: publishertest.Features{Keys: true, ArbitraryHeaders: true},
		}
	})
}
