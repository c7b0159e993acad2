package relay

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// panickyReads is a store whose reads panic.
type panickyReads struct{ fakeStore }

func (*panickyReads) ReadMark(context.Context, string, []int, int) ([]store.Row, error) {
	panic("store bug: cannot scan a row") // a bug in a store's handling of what it read
}

// TestRoundPanicIsItsError: a panic in a round outside any one message
// (here, in the store's read) fails the round as a failed statement
// does, instead of ending the process.
func TestRoundPanicIsItsError(t *testing.T) {
	r := newTestRelay(t, &panickyReads{}, publishFunc(func(*publisher.Envelope) error { return nil }))
	n, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)})
	if n != 0 || err == nil || !strings.Contains(err.Error(), "round panicked: store bug: cannot scan a row") {
		t.Fatalf("round: %d, %v", n, err)
	}
	// The round's locks were released: the next one runs.
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err == nil {
		t.Fatal("the second round did not run into the panic")
	}
}

// panickyTracer panics when a span starts.
type panickyTracer struct{ noop.Tracer }

func (panickyTracer) Start(context.Context, string, ...trace.SpanStartOption) (context.Context, trace.Span) {
	panic("tracer bug")
}

// TestRoundPanicOnAPublishGoroutine: a panic on one of the goroutines a
// round publishes from (two routes, each on its own) is raised again on
// the round's goroutine once the others are done, and fails the round.
func TestRoundPanicOnAPublishGoroutine(t *testing.T) {
	st := &fakeStore{rows: []store.Row{row(1, "order.created", "", ""), row(2, "invoice.sent", "", "")}}
	ok := publishFunc(func(*publisher.Envelope) error { return nil })
	r, err := New(&store.Backend{}, Config{
		Routes: []Route{{Pattern: "order.*", Publisher: ok}, {Pattern: "invoice.*", Publisher: ok}}, ID: "test",
		Logger: slog.New(slog.DiscardHandler), BatchSize: 100, Workers: 1, MinBatchSize: 100,
		MinPollInterval: time.Millisecond, MaxPollInterval: time.Second, PublishTimeout: 5 * time.Second,
		ShutdownTimeout: time.Second, LeaseTTL: 5 * time.Second, MaxPayloadBytes: 1 << 20, MetricsInterval: time.Minute,
		Store: st,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.own.parts = []int{0}
	r.own.validUntil = time.Now().Add(time.Hour)
	r.tracer = panickyTracer{}
	n, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)})
	if n != 0 || err == nil || !strings.Contains(err.Error(), "round panicked: tracer bug") {
		t.Fatalf("round: %d, %v", n, err)
	}
	if len(st.settled) != 0 {
		t.Errorf("settled %+v: the messages of a round that panicked stay as they were", st.settled)
	}
}
