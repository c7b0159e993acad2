package outboxkafka_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
)

// TestDrainThroughput measures how fast one relay drains a backlog from
// PostgreSQL into Kafka (an in-process kfake broker, so no network and no
// disk on the broker side). It only logs the figure and runs only with
// OUTBOX_DRAIN_BENCH=1 (OUTBOX_DRAIN_MESSAGES sets the backlog, default
// 100000):
//
//	OUTBOX_DRAIN_BENCH=1 go test -run TestDrainThroughput -v ./publisher/outboxkafka/
func TestDrainThroughput(t *testing.T) {
	if os.Getenv("OUTBOX_DRAIN_BENCH") == "" {
		t.Skip("measurement, not a test: set OUTBOX_DRAIN_BENCH=1 to run it")
	}
	total := 100000
	if v := os.Getenv("OUTBOX_DRAIN_MESSAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("OUTBOX_DRAIN_MESSAGES=%q: want a positive number", v)
		}
		total = n
	}
	const topic = "order.created"
	db := postgres(t)
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(12, topic))
	e := relaytest.NewEnqueuer(t, db)
	ctx := context.Background()
	for n := 0; n < total; n += 1000 {
		msgs := make([]outbox.Message, 0, 1000)
		for i := n; i < min(n+1000, total); i++ {
			msgs = append(msgs, outbox.Message{Topic: topic, Key: fmt.Sprintf("customer-%d", i%5000), Payload: fmt.Appendf(nil, `{"order_id":%d,"amount_cents":1999,"currency":"EUR"}`, i)})
		}
		if _, err := e.Enqueue(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	var sent atomic.Int64
	done := make(chan struct{})
	pub := &timedPublisher{Publisher: dial(t, c)}
	start := time.Now()
	cfg := relayConfig(pub)
	cfg.PublishTimeout = 0 // the defaults, as the command line runs it
	cfg.Retry = outbox.RetryPolicy{}
	cfg.OnBatch = func(r outbox.BatchReport) {
		if sent.Add(int64(r.Sent)) == int64(total) {
			close(done)
		}
	}
	relaytest.Start(t, db, cfg)
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		t.Fatalf("drained %d of %d in 10 minutes", sent.Load(), total)
	}
	d := time.Since(start)
	calls, in := pub.calls.Load(), time.Duration(pub.nanos.Load())
	t.Logf("drained %d messages from PostgreSQL to kfake in %v: %.0f msg/s", total, d.Round(time.Millisecond), float64(total)/d.Seconds())
	t.Logf("%d publish calls of %d messages on average took %v each, %.0f%% of the time; the rest is the relay's reads and writes in PostgreSQL",
		calls, int64(total)/max(calls, 1), (in / time.Duration(max(calls, 1))).Round(10*time.Microsecond), 100*in.Seconds()/d.Seconds())
}

// timedPublisher adds up the time spent in Publish.
type timedPublisher struct {
	outbox.Publisher
	calls, nanos atomic.Int64
}

func (p *timedPublisher) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	start := time.Now()
	defer func() { p.calls.Add(1); p.nanos.Add(int64(time.Since(start))) }()
	return p.Publisher.Publish(ctx, batch)
}
