package outboxpubsub_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestOutage runs the outage test with the Pub/Sub server (pstest)
// unreachable for 10 s: every connection of the publisher's client cut
// and refused at a TCP proxy, the server itself running on, so what it
// stored is read back after.
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, brokertest.Outage{Name: "ProxyRefuses", Start: func(t *testing.T) *brokertest.OutageTarget {
		srv := fakeServer(t)
		topic := createTopic(t, newClient(t, srv.Addr), randomID("outage-"))
		proxy := faultproxy.Start(t, srv.Addr)
		p := newPublisher(t, newClient(t, proxy.Addr()), nil)
		return &brokertest.OutageTarget{
			Publisher:   p,
			Destination: topic,
			Arrivals: func(t *testing.T) []publishertest.Received {
				var out []publishertest.Received
				for _, m := range srv.Messages() {
					if m.Topic == topicPath(topic) {
						out = append(out, received(topic, m))
					}
				}
				return out
			},
			Down:        func(*testing.T) { proxy.SetMode(faultproxy.Refuse) },
			Up:          func(*testing.T) { proxy.SetMode(faultproxy.Pass) },
			MaxAttempts: 3,
		}
	}})
}
