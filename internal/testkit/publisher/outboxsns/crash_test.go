package outboxsns_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/sqstest"
)

// crashTarget is the local server as the crash test uses it: each
// destination is a fresh topic (FIFO when fifo is set) with a queue
// subscribed to it with raw message delivery; the messages' topic is the
// topic's ARN, which the relay's sns:// URL without a topic publishes
// to, and outboxsqs.Consume reads the queue.
func crashTarget(fifo bool) func(t *testing.T) *brokertest.Target {
	return func(t *testing.T) *brokertest.Target {
		s, q := clients(t)
		return sqstest.CrashTarget(q, fifo, "sns://?region="+sqstest.Region+"&endpoint="+sqstest.Endpoint, func(t *testing.T, name string) (string, string) {
			arn := createTopic(t, s, name)
			return arn, subscribedQueue(t, s, q, arn, true)
		})
	}
}

// TestCrashEndToEnd: rows inserted with plain SQL reach a standard topic
// through an `outbox relay` process killed three times mid-stream, and
// outboxsqs.Consume, on a queue subscribed with raw message delivery,
// applies each exactly once through an inbox (brokertest.RunCrash).
func TestCrashEndToEnd(t *testing.T) {
	sqstest.SetRelayEnv(t) // the relay process inherits the environment
	brokertest.RunCrash(t, crashTarget(false))
}

// TestCrashEndToEndFIFO: the same from a FIFO topic to a FIFO queue, with
// the messages over 20 business keys (message groups): each message is
// applied exactly once, and each key's messages are first applied in the
// order they were committed, across the kills.
func TestCrashEndToEndFIFO(t *testing.T) {
	t.Parallel()
	sqstest.RunCrashFIFO(t, crashTarget(true), store.Postgres)
}
