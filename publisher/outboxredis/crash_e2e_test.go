package outboxredis_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// TestCrashEndToEnd: plain SQL inserts → a relay process killed
// mid-stream three times → a Redis stream → Consume and an inbox:
// every message applied exactly once.
func TestCrashEndToEnd(t *testing.T) {
	admin := localClient(t)
	stream := streamName(t, admin, "crash")
	createStream(t, admin, stream)
	c := relaytest.NewCrash(t, testdb.New(t, store.Postgres), stream)
	consume(t, admin, stream, "c1", fast, c.Handle)
	c.Run("redis://" + redisAddr + "/0")
}
