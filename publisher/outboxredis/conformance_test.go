package outboxredis_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/publisher/outboxredis"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestConformance runs the publisher suite against the local Redis: each
// destination is a fresh stream created by the test (streams are not
// created by the publisher), read back with XREAD from the start. The
// publisher's client reaches the server through a fault proxy, so that its
// connections can be cut; the reader connects directly.
func TestConformance(t *testing.T) {
	publishertest.Run(t, func(t *testing.T) *publishertest.Target {
		admin := localClient(t)
		proxy, err := faultproxy.New(redisAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
		p, err := outboxredis.New(client, &outboxredis.Config{CloseClient: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return &publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				name := streamName(t, admin, "conformance")
				createStream(t, admin, name)
				return name
			},
			MissingDestination: func(t *testing.T) string {
				return streamName(t, admin, "missing")
			},
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				got := waitEntries(t, admin, dest, n, 20*time.Second)
				out := make([]publishertest.Received, len(got))
				for i, e := range got {
					out[i] = e.Received
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
