package relay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// TestGateSoloAndSpread: small rounds on every worker make worker 0 read
// alone — the others wait, and it waits for theirs to end — and a big solo
// round spreads them again.
func TestGateSoloAndSpread(t *testing.T) {
	g := newGate(3)
	ctx := t.Context()
	blocked := func(i int) bool {
		t.Helper()
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		_, ok := g.enter(short, i)
		if ok && i != 0 {
			g.leave(i, soloBelow, false, nil)
		}
		return !ok
	}
	for _, i := range []int{1, 2} {
		if solo, ok := g.enter(ctx, i); solo || !ok {
			t.Fatalf("worker %d may not start while spread", i)
		}
	}
	g.leave(2, 1, false, nil)
	if solo, _ := g.enter(ctx, 0); solo {
		t.Fatal("worker 0 solo before any round")
	}
	g.leave(0, 2, false, nil)
	if g.isSolo() {
		t.Fatal("solo while worker 1's rounds are not known to be small")
	}
	g.leave(1, 2, false, nil)
	g.enter(ctx, 0)
	g.leave(0, 2, false, nil)
	if !g.isSolo() {
		t.Fatal("not solo after small rounds on every worker")
	}
	if !blocked(1) || !blocked(2) {
		t.Fatal("a worker started a round while worker 0 reads alone")
	}
	solo, ok := g.enter(ctx, 0)
	if !solo || !ok {
		t.Fatal("worker 0's round is not solo")
	}
	g.leave(0, soloUntil, true, map[int]int{3: 10, 4: 10, 5: 10, 6: 1})
	if g.isSolo() {
		t.Fatal("still solo after a big round")
	}
	workers := map[int]bool{}
	for _, p := range []int{3, 4, 5} {
		workers[g.worker(p)] = true
	}
	if len(workers) != 3 {
		t.Fatalf("the three busy partitions went to %d workers, want 3", len(workers))
	}

	// Going solo while another worker is in a round: worker 0 waits for
	// that round to end.
	for _, i := range []int{1, 2} {
		g.enter(ctx, i)
		g.leave(i, 0, false, nil)
	}
	g.enter(ctx, 1)
	g.enter(ctx, 0)
	g.leave(0, 0, false, nil)
	if !g.isSolo() {
		t.Fatal("not solo")
	}
	if !blocked(0) {
		t.Fatal("worker 0 read alone while worker 1 was in a round")
	}
	g.leave(1, 0, false, nil)
	if blocked(0) {
		t.Fatal("worker 0 still waits after worker 1's round ended")
	}
}

// TestBalanceSpreadsBusyPartitions: the busiest partitions go to
// different workers, and no partition is left out.
func TestBalanceSpreadsBusyPartitions(t *testing.T) {
	counts := map[int]int{0: 500, 4: 400, 8: 300, 12: 200, 16: 5, 20: 5}
	got := balance(counts, 4)
	if len(got) != len(counts) {
		t.Fatalf("assigned %d of %d partitions", len(got), len(counts))
	}
	seen := map[int]bool{}
	for _, p := range []int{0, 4, 8, 12} {
		if seen[got[p]] {
			t.Fatalf("two of the four busiest partitions on worker %d: %v", got[p], got)
		}
		seen[got[p]] = true
	}
}

// readTracker is a fakeStore that fails the test when two rounds read
// the same partition at once.
type readTracker struct {
	fakeStore
	t       *testing.T
	mu      sync.Mutex
	reading map[int]bool
	solo    int
}

func (s *readTracker) ReadMark(ctx context.Context, owner string, parts []int, limit int) ([]store.Row, error) {
	s.mu.Lock()
	for _, p := range parts {
		if s.reading[p] {
			s.t.Errorf("partition %d read by two rounds at once", p)
		}
		s.reading[p] = true
	}
	if len(parts) == 8 {
		s.solo++
	}
	s.mu.Unlock()
	time.Sleep(time.Millisecond)
	rows, err := s.fakeStore.ReadMark(ctx, owner, parts, limit)
	s.mu.Lock()
	for _, p := range parts {
		delete(s.reading, p)
	}
	s.mu.Unlock()
	var out []store.Row
	for _, r := range rows {
		if slices.Contains(parts, r.Partition) {
			out = append(out, r)
		} else {
			s.fakeStore.mu.Lock()
			s.rows = append(s.rows, r) // another worker's: back for later
			s.fakeStore.mu.Unlock()
		}
	}
	return out, err
}

// TestWorkersNeverShareAPartition: workers going solo and spreading again
// as the backlog comes and goes never read one partition in two rounds at
// once, and every message is published.
func TestWorkersNeverShareAPartition(t *testing.T) {
	st := &readTracker{t: t, reading: map[int]bool{}}
	var mu sync.Mutex
	sent := map[string]bool{}
	r := newTestRelay(t, st, publishFunc(func(e *publisher.Envelope) error {
		mu.Lock()
		sent[e.ID] = true
		mu.Unlock()
		return nil
	}))
	r.cfg.Workers, r.cfg.MinBatchSize = 4, 10
	r.gate = newGate(4)
	r.own.parts = []int{0, 1, 2, 3, 4, 5, 6, 7}
	add := func(from, n int) {
		st.fakeStore.mu.Lock()
		for i := from; i < from+n; i++ {
			rw := keyedRow(int64(i), fmt.Sprintf("k%d", i%5))
			rw.Partition = i % 8
			st.rows = append(st.rows, rw)
		}
		st.fakeStore.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 4 {
		w := &worker{index: i, batchSize: 10, wake: make(chan struct{}, 1)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx, w, nil)
		}()
	}
	total := 0
	for burst := range 6 {
		n := 3
		if burst%2 == 1 {
			n = 400
		}
		add(total+1, n)
		total += n
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			done := len(sent) == total
			mu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				cancel()
				wg.Wait()
				t.Fatalf("burst %d: %d of %d published", burst, len(sent), total)
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	wg.Wait()
	if st.solo == 0 {
		t.Fatal("worker 0 never read alone: the test proved nothing")
	}
}

func TestOnGrid(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, idleGridFrom - 1} {
		if got := onGrid(d); got != d {
			t.Errorf("onGrid(%v) = %v, want it unchanged (too short to be an idle wait)", d, got)
		}
	}
	for _, d := range []time.Duration{idleGridFrom, time.Second, 2*time.Second + 3*time.Millisecond} {
		before := time.Now()
		got := onGrid(d)
		after := time.Now()
		if got < d || got >= d+idleGrid+after.Sub(before) {
			t.Errorf("onGrid(%v) = %v, want within [d, d+%v)", d, got, idleGrid)
		}
		// The wait ends on the grid, give or take the time onGrid took.
		off := time.Duration(before.Add(got).UnixNano() % int64(idleGrid))
		if off > after.Sub(before) && idleGrid-off > after.Sub(before) {
			t.Errorf("onGrid(%v): ends %v past the grid", d, off)
		}
	}
}
