package outboxamqp_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// TestCrashEndToEnd: plain SQL inserts → a relay process killed
// mid-stream three times → RabbitMQ → Consume and an inbox: every
// message applied exactly once.
func TestCrashEndToEnd(t *testing.T) {
	topic := randomName("crash.order.")
	ch, queue := boundQueue(t, topic)
	c := relaytest.NewCrash(t, testdb.New(t, store.Postgres), topic)
	runConsume(t, ch, queue, c.Handle)
	c.Run(rabbitURL)
}
