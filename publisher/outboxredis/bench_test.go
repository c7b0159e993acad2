package outboxredis_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/publisher/outboxredis"
)

// BenchmarkPublish measures the publisher alone: batches of 1000 messages
// of ~500 bytes, each batch one pipeline awaited to its last reply, into a
// redis-server of the benchmark's own (appendfsync everysec).
func BenchmarkPublish(b *testing.B) {
	srv := startServer(b, "--appendonly", "yes", "--appendfsync", "everysec")
	admin := srv.client(b, nil)
	createStream(b, admin, "bench")
	p, err := outboxredis.New(srv.client(b, nil), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	payload := fmt.Appendf(nil, `{"pad":%q}`, strings.Repeat("x", 480))
	const batchSize = 1000
	batch := make([]*outbox.Envelope, batchSize)
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
