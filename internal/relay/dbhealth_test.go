package relay

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// readFailStore fails every read, as a database that is gone or a
// statement that fails each time would.
type readFailStore struct {
	fakeStore
	err error
}

func (s *readFailStore) ReadMark(context.Context, string, []int, int) ([]store.Row, error) {
	return nil, s.err
}

// TestReadyFollowsDatabase: rounds that keep failing make Ready an error
// naming them, each failure counted by class; one round that goes
// through makes it nil again. The lease upkeep is followed the same way.
func TestReadyFollowsDatabase(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := &readFailStore{err: errors.New(`failed to connect to "user=app database=shop host=db.internal"`)}
	r, err := New(&store.Backend{}, Config{
		Routes: []Route{{Pattern: "order.*", Publisher: publishFunc(func(*publisher.Envelope) error { return nil })}}, ID: "test",
		Logger: slog.New(slog.DiscardHandler), BatchSize: 100, Workers: 1, MinBatchSize: 100,
		MinPollInterval: time.Millisecond, MaxPollInterval: time.Second, PublishTimeout: 5 * time.Second,
		ShutdownTimeout: time.Second, LeaseTTL: 5 * time.Second, MaxPayloadBytes: 1 << 20, MetricsInterval: time.Minute,
		Store: st, Metrics: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.own.parts = []int{0}
	r.own.validUntil = time.Now().Add(time.Hour)
	ctx := context.Background()
	errorsOf := func(class string) float64 {
		return testutil.ToFloat64(r.metrics.dbErrors.WithLabelValues(class))
	}

	w := &worker{batchSize: 100}
	for i := range dbFailingAfter {
		if err := r.Ready(); err != nil {
			t.Fatalf("after %d failed rounds: Ready = %v, want nil", i, err)
		}
		_, err := r.round(ctx, w)
		if err == nil || dbClassOf(err) != dbRead {
			t.Fatalf("round over a failing read: %v (class %s), want a read failure", err, dbClassOf(err))
		}
		r.dbRound(ctx, err)
	}
	err = r.Ready()
	if err == nil || !strings.Contains(err.Error(), "rounds failing") || !strings.Contains(err.Error(), "database=shop") {
		t.Fatalf("after %d failed rounds: Ready = %v", dbFailingAfter, err)
	}
	if n := errorsOf(dbRead); n != dbFailingAfter {
		t.Errorf("outbox_database_errors_total{class=read} = %v, want %d", n, dbFailingAfter)
	}

	st.err = nil
	_, err = r.round(ctx, w)
	r.dbRound(ctx, err)
	if err != nil || r.Ready() != nil {
		t.Fatalf("after a round that went through (%v): Ready = %v, want nil", err, r.Ready())
	}

	// Failures of a round cut short by shutdown are not the database's.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for range dbFailingAfter {
		r.dbRound(cancelled, dbFailed(dbSettle, context.Canceled))
	}
	if r.Ready() != nil || errorsOf(dbSettle) != 0 {
		t.Fatalf("failures at shutdown: Ready = %v, settle errors %v", r.Ready(), errorsOf(dbSettle))
	}

	if dbClassOf(settleFailed(errors.New("x"))) != dbSettle || dbClassOf(errors.New("x")) != dbOther {
		t.Error("classes of a settle failure and of a plain error")
	}

	for range dbFailingAfter {
		r.dbLeaseUpkeep(ctx, errors.New("renewal failed"))
	}
	if err := r.Ready(); err == nil || !strings.Contains(err.Error(), "lease renewals failing") {
		t.Fatalf("after failing lease renewals: Ready = %v", err)
	}
	r.dbLeaseUpkeep(ctx, nil)
	if err := r.Ready(); err != nil || errorsOf(dbLease) != dbFailingAfter {
		t.Fatalf("after a renewal that went through: Ready = %v, lease errors %v", err, errorsOf(dbLease))
	}
}
