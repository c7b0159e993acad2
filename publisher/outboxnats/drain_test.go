package outboxnats_test

import (
	"context"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxnats"
)

// TestDrainThroughput measures how fast one relay drains a backlog from
// PostgreSQL into a JetStream file stream on the local server. It is a
// measurement, not a test: it runs only with OUTBOX_DRAIN_BENCH=1 and
// logs msg/s.
//
//	OUTBOX_DRAIN_BENCH=1 go test -run TestDrainThroughput -v ./publisher/outboxnats/
//
// OUTBOX_DRAIN_N sets the backlog (default 100000), OUTBOX_DRAIN_CPUPROFILE
// a file to write a CPU profile of the drain to.
func TestDrainThroughput(t *testing.T) {
	if os.Getenv("OUTBOX_DRAIN_BENCH") == "" {
		t.Skip("a measurement: set OUTBOX_DRAIN_BENCH=1 to run it")
	}
	n := 100_000
	if v := os.Getenv("OUTBOX_DRAIN_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("OUTBOX_DRAIN_N: %v", err)
		}
	}
	_, js := connect(t)
	stream := newStream(t, js, nil)
	db := newPostgres(t)
	topic := stream + ".order.created"
	pad := strings.Repeat("x", 440) // ~500-byte JSON payloads, as in PERF-NOTES
	start := time.Now()
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload)
		SELECT $1, 'customer-' || (g % 5000), '{"order_id":' || g || ',"pad":"' || $2 || '"}'
		FROM generate_series(1, $3::int) g`, topic, pad, n)
	db.Exec(t, "ANALYZE outbox_messages")
	t.Logf("backlog of %d rows inserted in %v", n, time.Since(start).Round(time.Millisecond))

	p, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	var pub outbox.Publisher = p
	if os.Getenv("OUTBOX_DRAIN_NOOP") != "" { // the relay's own ceiling
		pub = outbox.PublisherFunc(func(context.Context, *outbox.Envelope) error { return nil })
	}
	timed := &timedPublisher{Publisher: pub}
	var sent, rounds atomic.Int64
	done := make(chan struct{})
	if path := os.Getenv("OUTBOX_DRAIN_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	start = time.Now()
	cfg := relaytest.Config(timed)
	cfg.MaxPollInterval = 0
	cfg.OnBatch = func(r outbox.BatchReport) {
		rounds.Add(1)
		if sent.Add(int64(r.Sent)) == int64(n) {
			close(done)
		}
	}
	relaytest.Start(t, db, cfg)
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		t.Fatalf("drained %d of %d in 10 minutes", sent.Load(), n)
	}
	elapsed := time.Since(start)
	t.Logf("drained %d messages PostgreSQL → JetStream in %v: %.0f msg/s (%d rounds, %v inside Publish)", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), rounds.Load(), time.Duration(timed.busy.Load()).Round(time.Millisecond))
	if pub != outbox.Publisher(p) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(n) {
		t.Fatalf("stream holds %d messages, want %d", info.State.Msgs, n)
	}
}

// timedPublisher adds up the time spent inside Publish.
type timedPublisher struct {
	outbox.Publisher
	busy atomic.Int64
}

func (p *timedPublisher) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	start := time.Now()
	defer func() { p.busy.Add(int64(time.Since(start))) }()
	return p.Publisher.Publish(ctx, batch)
}

// BenchmarkPublish measures the publisher alone: batches of 1000
// messages of ~500 bytes into a file stream on the local server, each
// batch awaited to its last PubAck as the relay does.
//
//	go test -run '^$' -bench Publish ./publisher/outboxnats/
func BenchmarkPublish(b *testing.B) {
	_, js := connect(b)
	stream := newStream(b, js, nil)
	p, err := outboxnats.New(js, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	payload := []byte(`{"order_id":1,"pad":"` + strings.Repeat("x", 440) + `"}`)
	const size = 1000
	batch := make([]*outbox.Envelope, size)
	b.ResetTimer()
	for sent := 0; sent < b.N; sent += size {
		n := min(size, b.N-sent)
		for i := range n {
			batch[i] = &outbox.Envelope{ID: strconv.Itoa(sent + i), Topic: "order.created", Key: "k" + strconv.Itoa(i), Destination: stream + ".order.created", Payload: payload,
				Headers: map[string]string{outbox.HeaderTopic: "order.created", outbox.HeaderBusinessKey: "k" + strconv.Itoa(i), outbox.HeaderContentType: "application/json"}}
		}
		for i, err := range p.Publish(context.Background(), batch[:n]) {
			if err != nil {
				b.Fatalf("message %d: %v", sent+i, err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
