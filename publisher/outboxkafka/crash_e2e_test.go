package outboxkafka_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txoutbox/outbox/internal/relaytest"
)

// TestCrashEndToEnd: plain SQL inserts → a relay process killed
// mid-stream three times → Kafka (kfake, over TCP) → Consume and an
// inbox: every message applied exactly once.
func TestCrashEndToEnd(t *testing.T) {
	const topic = "crash.order.created"
	k := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
	c := relaytest.NewCrash(t, postgres(t), topic)
	runConsume(t, groupClient(t, k, topic), c.Handle)
	c.Run("kafka://" + strings.Join(k.ListenAddrs(), ","))
}
