package outboxpubsub_test

import (
	"time"

	"testing"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/publisher/outboxpubsub"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestConformance runs the publisher conformance suite against pstest.
// Each destination is a fresh topic; what arrived is read from the
// server's record of published messages, in arrival order. The
// publisher's connection goes through a fault proxy so that it can be
// cut. A missing topic is not a permanent error here (the route goes
// down instead, see TestMissingTopic), so that case is left out.
func TestConformance(t *testing.T) {
	publishertest.Run(t, func(t *testing.T) *publishertest.Target {
		srv := fakeServer(t)
		admin := newClient(t, srv.Addr)
		proxy := faultproxy.Start(t, srv.Addr)
		p := newPublisher(t, newClient(t, proxy.Addr()), nil)
		return &publishertest.Target{
			Publisher:      p,
			NewDestination: func(t *testing.T) string { return createTopic(t, admin, randomID("topic-")) },
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				var out []publishertest.Received
				for _, m := range stored(t, srv, dest, n, 20*time.Second)[:n] {
					out = append(out, received(dest, m))
				}
				return out
			},
			Disconnect: proxy.Disconnect,
			Features:   publishertest.Features{Keys: true, ArbitraryHeaders: true},
		}
	})
}

// TestConformanceWithoutOrdering runs the suite with ordering disabled:
// no ordering keys, the key only in the outbox-business-key attribute.
func TestConformanceWithoutOrdering(t *testing.T) {
	publishertest.Run(t, func(t *testing.T) *publishertest.Target {
		srv := fakeServer(t)
		admin := newClient(t, srv.Addr)
		proxy := faultproxy.Start(t, srv.Addr)
		p := newPublisher(t, newClient(t, proxy.Addr()), &outboxpubsub.Config{DisableOrdering: true})
		if p.PublishesRuns() {
			t.Fatal("PublishesRuns with ordering disabled")
		}
		return &publishertest.Target{
			Publisher:      p,
			NewDestination: func(t *testing.T) string { return createTopic(t, admin, randomID("topic-")) },
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				var out []publishertest.Received
				for _, m := range stored(t, srv, dest, n, 20*time.Second)[:n] {
					if m.OrderingKey != "" {
						t.Errorf("ordering key %q with ordering disabled", m.OrderingKey)
					}
					out = append(out, received(dest, m))
				}
				return out
			},
			Disconnect: proxy.Disconnect,
			Features:   publishertest.Features{ArbitraryHeaders: true},
		}
	})
}
