package outboxamqp_test

import (
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestConformance runs the publisher suite against the local RabbitMQ.
// A destination is a routing key on amq.topic with a fresh queue bound to
// it; the missing destination is a routing key no queue is bound to, which
// the broker returns as unroutable. (A missing exchange, the other way a
// destination can be missing, is TestMissingExchange.) The publisher
// reaches the broker through a fault proxy, so that its connection can be
// cut; the consumers connect directly.
func TestConformance(t *testing.T) {
	dialRabbit(t)
	publishertest.Run(t, func(t *testing.T) *publishertest.Target {
		proxy, err := faultproxy.New(rabbitAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		p := newPublisher(t, viaAddr(t, proxy.Addr()), nil)
		var mu sync.Mutex
		consumers := map[string]*consumer{}
		return &publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				dest := randomName("conformance.")
				c := consume(t, outboxamqp.DefaultExchange, dest)
				mu.Lock()
				consumers[dest] = c
				mu.Unlock()
				return dest
			},
			MissingDestination: func(*testing.T) string { return randomName("conformance.unbound.") },
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				mu.Lock()
				c := consumers[dest]
				mu.Unlock()
				var out []publishertest.Received
				for _, d := range c.waitN(t, n, 20*time.Second) {
					out = append(out, received(d))
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
