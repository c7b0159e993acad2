package outboxamqp_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
)

// BenchmarkDrain measures one relay draining a PostgreSQL backlog of b.N
// messages into RabbitMQ, to a durable queue, so every confirm waits for
// the broker's disk:
//
//	go test -run '^$' -bench Drain -benchtime 100000x ./internal/testkit/publisher/outboxamqp/
func BenchmarkDrain(b *testing.B) {
	topic := testdb.RandomName("drain.")
	ch, err := dialRabbit(b).Channel()
	if err != nil {
		b.Fatal(err)
	}
	qname := testdb.RandomName("outbox-drain-")
	if _, err := ch.QueueDeclare(qname, true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	defer func() { _, _ = ch.QueueDelete(qname, false, false, false) }()
	if err := ch.QueueBind(qname, topic, outboxamqp.DefaultExchange, false, nil); err != nil {
		b.Fatal(err)
	}
	relaytest.Drain(b, testdb.New(b, store.Postgres), topic, newPublisher(b, rabbitURL, nil))

	q, err := ch.QueueDeclarePassive(qname, true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	if q.Messages < b.N {
		b.Fatalf("the queue holds %d messages, want %d", q.Messages, b.N)
	}
}
