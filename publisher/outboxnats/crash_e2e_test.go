package outboxnats_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/testdb"
)

// TestCrashEndToEnd: plain SQL inserts on each database → a relay
// process killed mid-stream three times → JetStream → Consume and an
// inbox on the same database: every message applied exactly once.
func TestCrashEndToEnd(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			_, js := connect(t)
			stream := newStream(t, js, nil)
			c := relaytest.NewCrash(t, testdb.New(t, d), stream+".order.created")
			consume(t, durable(t, js, stream), c.Handle)
			c.Run(natsURL)
		})
	}
}
