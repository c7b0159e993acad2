package outboxmqtt_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// TestCrashEndToEnd: plain SQL inserts → a relay process killed
// mid-stream three times → Mosquitto → Consume and an inbox: every
// message applied exactly once. The broker is the test's own, queueing
// without limit (max_queued_messages 0): with Mosquitto's default of
// 1000, a consumer that falls behind the burst loses messages.
func TestCrashEndToEnd(t *testing.T) {
	broker := startMosquitto(t, "max_queued_messages 0\n")
	prefix := "crash" + randomHex(5)
	c := relaytest.NewCrash(t, testdb.New(t, store.Postgres), prefix+".order.created")
	runConsume(t, consumeConfig(broker.addr, prefix+"/#"), c.Handle)
	c.Run("mqtt://" + broker.addr)
}
