package outboxkafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestConformance runs the publisher suite against an in-process Kafka
// of three brokers that creates no topics by itself; a plain kgo consumer
// reads what arrived.
func TestConformance(t *testing.T) {
	t.Parallel()
	publishertest.Run(t, func(t *testing.T) *publishertest.Target {
		c := newCluster(t, kfake.NumBrokers(3))
		p := dial(t, c)
		return &publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				topic := randomTopic("conformance")
				createTopic(t, c.ListenAddrs(), 4, topic)
				return topic
			},
			MissingDestination: func(*testing.T) string { return randomTopic("missing") },
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				var out []publishertest.Received
				for _, r := range newConsumer(t, c.ListenAddrs(), dest).readN(t, n, 20*time.Second) {
					out = append(out, received(r))
				}
				return out
			},
			Features: publishertest.Features{Keys: true, ArbitraryHeaders: true, MissingDestinationIsPermanent: true},
		}
	})
}
