package outboxkafka_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// BenchmarkDrain measures one relay draining a PostgreSQL backlog of b.N
// messages into Kafka (an in-process kfake broker: no network, no disk on
// the broker side, so the figure is the relay's and the client's):
//
//	go test -run '^$' -bench Drain -benchtime 100000x ./internal/testkit/publisher/outboxkafka/
func BenchmarkDrain(b *testing.B) {
	const topic = "order.created"
	c := newCluster(b, kfake.NumBrokers(1), kfake.SeedTopics(12, topic))
	relaytest.Drain(b, testdb.New(b, store.Postgres), topic, dial(b, c))

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	offsets, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		b.Fatal(err)
	}
	var records int64
	offsets.Each(func(o kadm.ListedOffset) { records += o.Offset })
	if records < int64(b.N) {
		b.Fatalf("the topic holds %d records, want at least %d", records, b.N)
	}
}
