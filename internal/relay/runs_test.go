package relay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// runPublisher keeps the run promise: within a call, a key's messages
// after a failed one fail too. fail says which messages fail by
// themselves; calls records each call's message ids.
type runPublisher struct {
	mu    sync.Mutex
	calls [][]int64
	fail  func(id int64) error
	// broken: confirm what follows a failure instead (a publisher that
	// breaks its promise).
	broken bool
}

func (p *runPublisher) Publish(_ context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	var ids []int64
	failed := map[string]error{}
	for i, e := range batch {
		var id int64
		fmt.Sscanf(e.ID, "m%d", &id)
		ids = append(ids, id)
		if err := failed[e.Key]; err != nil && e.Key != "" && !p.broken {
			errs[i] = err
			continue
		}
		if p.fail != nil {
			errs[i] = p.fail(id)
		}
		if errs[i] != nil && class(errs[i]) != publisher.ClassPermanent {
			failed[e.Key] = errs[i]
		}
	}
	p.mu.Lock()
	p.calls = append(p.calls, ids)
	p.mu.Unlock()
	return errs
}

// newRunsRelay is newTestRelay with a route that publishes runs.
func newRunsRelay(t *testing.T, st Store, pub Publisher) *Relay {
	t.Helper()
	return newRouteRelay(t, st, Route{Pattern: "order.*", Publisher: pub, Runs: true})
}

// TestLanesPutARunInOneWave: a route that publishes runs gets a key's
// consecutive messages in one wave, in id order; a key whose messages
// alternate between that route and another gets a wave per change.
func TestLanesPutARunInOneWave(t *testing.T) {
	runs := &routeState{Route: Route{Runs: true}}
	plain := &routeState{}
	var items []*item
	for i := range 40 {
		rw := keyedRow(int64(i+1), fmt.Sprintf("k%d", i%2))
		items = append(items, &item{row: &rw, route: runs})
	}
	ls := lanes(items)
	for _, lane := range ls {
		if len(lane) != 1 {
			t.Fatalf("one route that publishes runs: %d waves in a lane, want 1", len(lane))
		}
		for i := 1; i < len(lane[0]); i++ {
			a, b := lane[0][i-1].row, lane[0][i].row
			if a.Key == b.Key && a.ID >= b.ID {
				t.Fatalf("key %s: %d before %d", a.Key, a.ID, b.ID)
			}
		}
	}

	// k: runs, runs, plain, runs → waves 0, 0, 1, 2.
	var mixed []*item
	for i, rs := range []*routeState{runs, runs, plain, runs} {
		rw := keyedRow(int64(i+1), "k")
		mixed = append(mixed, &item{row: &rw, route: rs})
	}
	ls = lanes(mixed)
	if len(ls) != 1 || len(ls[0]) != 3 || len(ls[0][0]) != 2 || ls[0][1][0].row.ID != 3 || ls[0][2][0].row.ID != 4 {
		t.Fatalf("mixed routes: %d lanes, waves %v", len(ls), waveIDs(ls))
	}
}

func waveIDs(ls [][][]*item) [][]int64 {
	var out [][]int64
	for _, lane := range ls {
		for _, wave := range lane {
			var ids []int64
			for _, it := range wave {
				ids = append(ids, it.row.ID)
			}
			out = append(out, ids)
		}
	}
	return out
}

// TestRoundPublishesAOneKeyRunInOneCall: a one-key batch on a route that
// publishes runs goes out in one call, in id order, and all of it is sent.
func TestRoundPublishesAOneKeyRunInOneCall(t *testing.T) {
	var rows []store.Row
	for i := range 80 {
		rows = append(rows, keyedRow(int64(i+1), "k"))
	}
	st := &fakeStore{rows: rows}
	pub := &runPublisher{}
	r := newRunsRelay(t, st, pub)
	if n, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil || n != 80 {
		t.Fatalf("round: %d, %v", n, err)
	}
	if len(pub.calls) != 1 || len(pub.calls[0]) != 80 || !slices.IsSorted(pub.calls[0]) {
		t.Fatalf("calls %v, want one call of the 80 messages in id order", pub.calls)
	}
	for id := int64(1); id <= 80; id++ {
		if o, ok := st.outcome(t, id); !ok || o.Status != store.StatusSent {
			t.Fatalf("message %d: %+v (settled %v), want sent", id, o, ok)
		}
	}
}

// TestRoundRunFailureMidRun: a message failing in the middle of its key's
// run is charged an attempt and retried; the rest of the run, failed with
// it by the publisher, waits behind it uncharged; another key's run in the
// same call is sent whole.
func TestRoundRunFailureMidRun(t *testing.T) {
	var rows []store.Row
	for i := range 40 {
		rows = append(rows, keyedRow(int64(i+1), fmt.Sprintf("k%d", i%2)))
	}
	// k0 holds the odd ids; 21 fails.
	st := &fakeStore{rows: rows}
	pub := &runPublisher{fail: func(id int64) error {
		if id == 21 {
			return fmt.Errorf("broker hiccup")
		}
		return nil
	}}
	r := newRunsRelay(t, st, pub)
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 40; id++ {
		o, ok := st.outcome(t, id)
		switch {
		case id%2 == 0 || id < 21:
			if !ok || o.Status != store.StatusSent {
				t.Errorf("message %d: %+v (settled %v), want sent", id, o, ok)
			}
		case id == 21:
			if !ok || o.Status != store.StatusPending || !o.CountAttempt {
				t.Errorf("the failed message: %+v (settled %v), want a counted retry", o, ok)
			}
		default:
			if !ok || o.Status != store.StatusPending || o.CountAttempt {
				t.Errorf("message %d behind the failed one: %+v (settled %v), want pending, not counted", id, o, ok)
			}
		}
	}
	if down, _, _ := r.router.routes[0].health.state(); down {
		t.Fatal("a failure mid-run took the route down")
	}
}

// TestRoundRunPermanentFailureUnblocksItsKey: a message that goes dead in
// the middle of a run lets the rest of its key through in the same call.
func TestRoundRunPermanentFailureUnblocksItsKey(t *testing.T) {
	var rows []store.Row
	for i := range 10 {
		rows = append(rows, keyedRow(int64(i+1), "k"))
	}
	st := &fakeStore{rows: rows}
	pub := &runPublisher{fail: func(id int64) error {
		if id == 4 {
			return publisher.Permanent(fmt.Errorf("record too large"))
		}
		return nil
	}}
	r := newRunsRelay(t, st, pub)
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 10; id++ {
		want := store.StatusSent
		if id == 4 {
			want = store.StatusDead
		}
		if o, _ := st.outcome(t, id); o.Status != want {
			t.Errorf("message %d: %+v, want %s", id, o, want)
		}
	}
}

// TestRoundRunSplitOverCallsStopsAtAFailure: a run longer than the
// route's in-flight bound is published over several calls; after a
// failure in one, the key's later messages are not published in this
// round at all.
func TestRoundRunSplitOverCallsStopsAtAFailure(t *testing.T) {
	var rows []store.Row
	for i := range 30 {
		rows = append(rows, keyedRow(int64(i+1), "k"))
	}
	st := &fakeStore{rows: rows}
	pub := &runPublisher{fail: func(id int64) error {
		if id == 7 {
			return fmt.Errorf("broker hiccup")
		}
		return nil
	}}
	r := newRouteRelay(t, st, Route{Pattern: "order.*", Publisher: pub, Runs: true, MaxInFlight: 10})
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	if len(pub.calls) != 1 || !slices.Equal(pub.calls[0], []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("calls %v, want one call of messages 1-10 and nothing after the failure", pub.calls)
	}
	for id := int64(11); id <= 30; id++ {
		if o, ok := st.outcome(t, id); ok {
			t.Fatalf("message %d, never published, was settled: %+v", id, o)
		}
	}
}

// TestRoundRunBrokenPromiseKeepsTheTruth: a publisher that confirms a
// message after an earlier one of its key failed has broken the key's
// order; the relay records what happened (the confirmed one sent, the
// failed one retried) rather than hide it.
func TestRoundRunBrokenPromiseKeepsTheTruth(t *testing.T) {
	rows := []store.Row{keyedRow(1, "k"), keyedRow(2, "k"), keyedRow(3, "k")}
	st := &fakeStore{rows: rows}
	pub := &runPublisher{broken: true, fail: func(id int64) error {
		if id == 2 {
			return fmt.Errorf("broker hiccup")
		}
		return nil
	}}
	r := newRunsRelay(t, st, pub)
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]string{1: store.StatusSent, 2: store.StatusPending, 3: store.StatusSent} {
		if o, _ := st.outcome(t, id); o.Status != want {
			t.Errorf("message %d: %+v, want %s", id, o, want)
		}
	}
}
