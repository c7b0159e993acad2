package relaytest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// Drain is the body of the publishers' BenchmarkDrain: it fills db (a
// PostgreSQL database) with a backlog of b.N messages of topic in one
// INSERT … SELECT — ~500-byte JSON payloads, business keys cycling over
// 5,000 customers — and times one relay with default settings delivering
// all of them through pub. It reports msg/s and the share of the drain's
// wall time spent inside Publish (the rest is the relay's own reads and
// writes in PostgreSQL). The caller checks the broker's side afterwards.
//
// b.N is the backlog, so run it with an explicit count:
//
//	go test -run '^$' -bench Drain -benchtime 100000x ./publisher/outboxnats/
func Drain(b *testing.B, db *testdb.DB, topic string, pub outbox.Publisher) {
	b.Helper()
	b.StopTimer()
	pad := strings.Repeat("x", 440)
	db.Exec(b, `INSERT INTO outbox_messages (topic, business_key, payload)
		SELECT $1, 'customer-' || (g % 5000), '{"order_id":' || g || ',"pad":"' || $2 || '"}'
		FROM generate_series(1, $3::int) g`, topic, pad, b.N)
	db.Exec(b, "ANALYZE outbox_messages")

	timed := &timedPublisher{Publisher: pub}
	var sent atomic.Int64
	done := make(chan struct{})
	cfg := &outbox.RelayConfig{
		Routes: []outbox.Route{{Pattern: "*", Publisher: timed}},
		OnBatch: func(r outbox.BatchReport) {
			if sent.Add(int64(r.Sent)) == int64(b.N) {
				close(done)
			}
		},
	}
	b.StartTimer()
	start := time.Now()
	stop := Start(b, db, cfg)
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("drained %d of %d messages in 10 minutes", sent.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	if n := Count(b, db, "sent"); n != b.N {
		b.Fatalf("%d rows sent, want %d", n, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(100*time.Duration(timed.busy.Load()).Seconds()/elapsed.Seconds(), "%in-publish")
	b.ReportMetric(float64(timed.calls.Load()), "publishes")
}

// timedPublisher adds up the calls to and the time spent inside Publish
// (summed over the relay's concurrent workers).
type timedPublisher struct {
	outbox.Publisher
	calls, busy atomic.Int64
}

func (p *timedPublisher) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	start := time.Now()
	defer func() { p.calls.Add(1); p.busy.Add(int64(time.Since(start))) }()
	return p.Publisher.Publish(ctx, batch)
}
