package outboxkinesis_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestCrashEndToEnd: rows inserted with plain SQL over 20 business keys
// reach a stream of two shards through an `outbox relay` process killed
// three times mid-stream (kinesis:// without a stream: the messages'
// topic names it), and Consume applies each exactly once through an
// inbox; each key's messages (one partition key, so one shard) are first
// applied in the order they were committed, across the kills. This is
// brokertest.RunCrash with relaytest.Crash.Keys set.
func TestCrashEndToEnd(t *testing.T) {
	t.Parallel()
	tg := target(t)
	topic := tg.NewDestination(t)
	c := relaytest.NewCrash(t, testdb.New(t, store.Postgres), topic)
	c.Keys = 20
	tg.Consume(t, topic, c.Handle)
	c.Run(tg.URL) // TestMain put the local server's credentials in the environment
}
