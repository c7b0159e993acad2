package outboxnats_test

import (
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/publisher/outboxnats"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestConformance runs the publisher suite against the local JetStream:
// each destination is a fresh stream, read back by an ordered consumer on
// a connection of its own. The publisher's connection goes through a fault
// proxy, so that it can be cut.
func TestConformance(t *testing.T) {
	publishertest.Run(t, func(t *testing.T) *publishertest.Target {
		proxy, _, js := proxied(t)
		p, err := outboxnats.New(js, &outboxnats.Config{CloseConn: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		_, consumer := connect(t)
		return &publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				return newStream(t, consumer, nil) + ".orders"
			},
			MissingDestination: func(*testing.T) string {
				return "nostream_" + randomHex() + ".orders"
			},
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				var out []publishertest.Received
				for _, m := range readStream(t, consumer, streamOf(dest), n, 20*time.Second) {
					out = append(out, received(m))
				}
				return out
			},
			Disconnect: func(*testing.T) func() {
				proxy.SetMode(faultproxy.Refuse)
				return func() { proxy.SetMode(faultproxy.Pass) }
			},
			Features: publishertest.Features{Keys: true, ArbitraryHeaders: true, MissingDestinationIsPermanent: true},
		}
	})
}
