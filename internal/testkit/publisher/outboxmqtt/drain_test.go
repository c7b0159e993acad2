package outboxmqtt_test

import (
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// BenchmarkDrain measures one relay draining a PostgreSQL backlog of b.N
// messages into the local Mosquitto (QoS 1, in flight ≤ the broker's
// Receive Maximum), every message then counted at a QoS 1 subscriber:
//
//	go test -run '^$' -bench Drain -benchtime 100000x ./internal/testkit/publisher/outboxmqtt/
func BenchmarkDrain(b *testing.B) {
	requireBroker(b)
	prefix := "drain" + randomHex(4)
	sub := subscribe(b, brokerAddr, prefix+"/#")
	relaytest.Drain(b, testdb.New(b, store.Postgres), prefix+".order.created", dial(b, brokerAddr, nil))
	relaytest.WaitFor(b, 5*time.Minute, "every message at the subscriber", func() bool { return sub.distinct() == b.N })
}
