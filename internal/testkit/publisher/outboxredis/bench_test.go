package outboxredis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
)

// BenchmarkPublish measures the publisher alone: batches of 1000 messages
// of ~500 bytes, each batch one pipeline awaited to its last reply, into a
// redis-server of the benchmark's own (appendfsync everysec).
func BenchmarkPublish(b *testing.B) {
	srv := startServer(b, "--appendonly", "yes", "--appendfsync", "everysec")
	admin := srv.client(b, nil)
	createStream(b, admin, "bench")
	p := newPublisher(b, srv.client(b, nil), nil)
	payload := fmt.Appendf(nil, `{"pad":%q}`, strings.Repeat("x", 480))
	const batchSize = 1000
	batch := make([]*publisher.Envelope, batchSize)
	for i := range batch {
		batch[i] = env("bench", fmt.Sprintf("key-%d", i), string(payload))
	}
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for sent := 0; sent < b.N; sent += batchSize {
		for i, err := range publish(p, batch[:min(batchSize, b.N-sent)]...) {
			if err != nil {
				b.Fatalf("message %d: %v", i, err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkDrain measures one relay draining a PostgreSQL backlog of b.N
// messages into a Redis stream of the benchmark's own redis-server
// (appendonly, appendfsync everysec):
//
//	go test -run '^$' -bench Drain -benchtime 100000x ./internal/testkit/publisher/outboxredis/
func BenchmarkDrain(b *testing.B) {
	srv := startServer(b, "--appendonly", "yes", "--appendfsync", "everysec")
	admin := srv.client(b, nil)
	createStream(b, admin, "bench.drain")
	p := newPublisher(b, srv.client(b, nil), nil)
	relaytest.Drain(b, testdb.New(b, store.Postgres), "bench.drain", p)
	if l, err := admin.XLen(context.Background(), "bench.drain").Result(); err != nil || l < int64(b.N) {
		b.Fatalf("XLEN = %d, %v; want %d", l, err, b.N)
	}
}
