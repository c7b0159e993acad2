package relay

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// benchItems are n sent items over 10 topics, as a round leaves them.
func benchItems(rs *routeState, n int) []*item {
	items := make([]*item, n)
	now := time.Now()
	for i := range items {
		row := &store.Row{ID: int64(i), MessageID: "m" + strconv.Itoa(i), Topic: "bench.t" + strconv.Itoa(i%10), CreatedAt: now.Add(-time.Second)}
		items[i] = &item{row: row, route: rs, decided: true, confirmed: now,
			out: store.Outcome{ID: row.ID, Status: store.StatusSent, CountAttempt: true},
			env: &publisher.Envelope{ID: row.MessageID, Topic: row.Topic, Destination: row.Topic, Payload: []byte(`{}`), Attempt: 1,
				Headers: map[string]string{publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", publisher.HeaderContentType: "application/json"}}}
	}
	return items
}

// BenchmarkObserveRound is the metrics' cost per message of a settled round.
func BenchmarkObserveRound(b *testing.B) {
	m, err := newRelayMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	rs := &routeState{name: "all", health: newHealth(Route{})}
	m.route(rs)
	items := benchItems(rs, 1000)
	var clock dbClock
	clock.set(time.Now(), time.Now(), time.Now())
	b.ResetTimer()
	for range b.N {
		m.observe(items, &clock)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/msg")
}

// BenchmarkSendSpan is the tracing cost per published message: without a
// recording provider, and with the SDK sampling every span.
func BenchmarkSendSpan(b *testing.B) {
	exp := tracetest.NewNoopExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer func() { _ = sdk.Shutdown(context.Background()) }()
	for _, c := range []struct {
		name string
		r    *Relay
	}{
		{"noop", &Relay{tracer: newTracer(noop.NewTracerProvider())}},
		{"global-unset", &Relay{tracer: newTracer(nil)}},
		{"sdk-sampled", &Relay{tracer: newTracer(sdk)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			rs := &routeState{name: "all", health: newHealth(Route{})}
			items := benchItems(rs, 1)
			b.ReportAllocs()
			for range b.N {
				endSend(c.r.startSend(rs, items[0]), nil)
			}
		})
	}
}
