package outboxsqs_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/sqstest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// crashTarget is the local server as the crash test uses it: each
// destination is a fresh queue (FIFO when fifo is set) named as the
// messages' topic, which the relay's sqs:// URL without a queue resolves
// by name, and read by Consume.
func crashTarget(fifo bool) func(t *testing.T) *brokertest.Target {
	return func(t *testing.T) *brokertest.Target {
		c := sqstest.Client(t)
		return sqstest.CrashTarget(c, fifo, "sqs://?region="+sqstest.Region+"&endpoint="+sqstest.Endpoint, func(t *testing.T, name string) (string, string) {
			return name, sqstest.CreateQueue(t, c, name, nil)
		})
	}
}

// TestCrashEndToEnd: rows inserted with plain SQL reach a standard queue
// through an `outbox relay` process killed three times mid-stream, and
// Consume applies each exactly once through an inbox (brokertest.RunCrash).
func TestCrashEndToEnd(t *testing.T) {
	sqstest.SetRelayEnv(t) // the relay process inherits the environment
	brokertest.RunCrash(t, crashTarget(false))
}

// TestCrashEndToEndFIFO: the same on a FIFO queue, with the messages
// over 20 business keys (message groups): each message is applied
// exactly once, and each key's messages are first applied in the order
// they were committed, across the kills — with the outbox on PostgreSQL,
// MariaDB and SQLite.
func TestCrashEndToEndFIFO(t *testing.T) {
	t.Parallel()
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) { sqstest.RunCrashFIFO(t, crashTarget(true), d) })
	}
}
