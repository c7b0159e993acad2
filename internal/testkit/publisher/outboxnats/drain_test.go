package outboxnats_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
)

// BenchmarkDrain measures one relay draining a PostgreSQL backlog of b.N
// messages into a JetStream file stream on the local server:
//
//	go test -run '^$' -bench Drain -benchtime 100000x ./internal/testkit/publisher/outboxnats/
func BenchmarkDrain(b *testing.B) {
	js, p, stream := publisherOn(b, nil)
	relaytest.Drain(b, testdb.New(b, store.Postgres), stream+".order.created", p)
	if n := streamCount(b, js, stream); n != uint64(b.N) {
		b.Fatalf("stream holds %d messages, want %d", n, b.N)
	}
}

// BenchmarkPublish measures the publisher alone: batches of 1000
// messages of ~500 bytes into a file stream on the local server, each
// batch awaited to its last PubAck as the relay does.
//
//	go test -run '^$' -bench Publish ./internal/testkit/publisher/outboxnats/
func BenchmarkPublish(b *testing.B) {
	_, p, stream := publisherOn(b, nil)
	payload := []byte(`{"order_id":1,"pad":"` + strings.Repeat("x", 440) + `"}`)
	const size = 1000
	batch := make([]*publisher.Envelope, size)
	b.ResetTimer()
	for sent := 0; sent < b.N; sent += size {
		n := min(size, b.N-sent)
		for i := range n {
			batch[i] = &publisher.Envelope{ID: strconv.Itoa(sent + i), Topic: "order.created", Key: "k" + strconv.Itoa(i), Destination: stream + ".order.created", Payload: payload,
				Headers: map[string]string{publisher.HeaderTopic: "order.created", publisher.HeaderBusinessKey: "k" + strconv.Itoa(i), publisher.HeaderContentType: "application/json"}}
		}
		for i, err := range p.Publish(context.Background(), batch[:n]) {
			if err != nil {
				b.Fatalf("message %d: %v", sent+i, err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
