package relay

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Solo and spread rounds.
//
// A relay's workers split its partitions, each reading and settling its
// share, so that a backlog is read, published and settled by several
// rounds at once. At an everyday rate that split costs the database more
// than it gains: every wake-up sends each worker to read its share, most
// of those reads find nothing, and the rest carry a message or two, each
// round paying for its statements. So while rounds are small one worker
// (worker 0) reads every partition the relay holds, alone, and after a
// small round waits gatherWindow before reading again, gathering what
// arrives meanwhile into one round; the other workers wait. When a solo
// round comes back with soloUntil messages or more, the workers spread
// again, over an assignment of the partitions that balances the rows the
// solo round found in each (few business keys land in few partitions,
// which a fixed split by partition number can leave on one worker).
//
// A partition is only ever read by one round at a time: worker 0 starts a
// solo round only when no other worker is in a round, and the others start
// rounds only while spread; the mode changes between worker 0's rounds.

const (
	// soloBelow: worker 0 goes solo when the last round of every worker
	// read fewer messages than this.
	soloBelow = 8
	// soloUntil: a solo round that reads this many or more spreads the
	// workers again.
	soloUntil = 4 * soloBelow
	// gatherWindow is the wait after a small solo round before the next
	// read (at most MinPollInterval). At 1,000 msg/s on PostgreSQL, 3 ms
	// against 2 ms: rounds of 4.6–4.8 messages instead of 3.4–3.9, the
	// relay's database CPU 109–131 µs a message instead of 140–165,
	// commit→confirm p99 6.0–7.0 ms instead of 5.3–7.1 (BENCHMARKS.md).
	gatherWindow = 3 * time.Millisecond
	// wokenFollowUp is, in MinPollIntervals, the wait before the next
	// read after a small solo round that a wake-up started, when such
	// rounds no longer gather.
	wokenFollowUp = 5
)

// gate holds which rounds may run: solo or spread, and the spread
// assignment of partitions to workers.
type gate struct {
	mu      sync.Mutex
	workers int
	solo    bool
	// busy counts the workers other than 0 in a round.
	busy int
	// last[i] is how many messages worker i's last round read.
	last []int
	// assign maps a partition to its worker while spread; partitions it
	// does not hold go by partition number modulo the workers.
	assign map[int]int
	// changed is closed (and replaced) whenever solo or busy changes.
	changed chan struct{}
}

func newGate(workers int) *gate {
	g := &gate{workers: workers, last: make([]int, workers), changed: make(chan struct{})}
	for i := range g.last {
		g.last[i] = soloBelow // not known to be small yet
	}
	return g
}

// broadcast wakes every waiter; g.mu is held.
func (g *gate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// enter waits until worker i may start a round and reports whether that
// round is solo (worker 0 reading every partition). It returns false in
// ok when ctx ended first.
func (g *gate) enter(ctx context.Context, i int) (solo, ok bool) {
	for {
		g.mu.Lock()
		switch {
		case i == 0 && (!g.solo || g.busy == 0):
			solo = g.solo
			g.mu.Unlock()
			return solo, true
		case i != 0 && !g.solo:
			g.busy++
			g.mu.Unlock()
			return false, true
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return false, false
		case <-ch:
		}
	}
}

// leave ends worker i's round, which read n messages (-1: it owned
// nothing). Worker 0 changes the mode here: solo when every worker's rounds
// are small, spread again (balanced by counts, the rows the solo round
// read per partition) when a solo round is big.
func (g *gate) leave(i, n int, solo bool, counts map[int]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i != 0 {
		g.busy--
		g.last[i] = n
		if g.busy == 0 {
			g.broadcast()
		}
		return
	}
	g.last[0] = n
	switch {
	case g.workers == 1:
	case solo && n >= soloUntil:
		g.solo = false
		g.assign = balance(counts, g.workers)
		for j := range g.last {
			g.last[j] = n
		}
		g.broadcast()
	case !solo && n >= 0 && slices.Max(g.last) < soloBelow:
		g.solo = true
		g.broadcast()
	}
}

// worker is the worker that reads partition p while spread.
func (g *gate) worker(p int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w, ok := g.assign[p]; ok {
		return w
	}
	return p % g.workers
}

// isSolo reports whether worker 0 reads alone.
func (g *gate) isSolo() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.solo
}

// balance assigns the partitions in counts (rows read per partition) to
// workers, busiest partition first, each to the worker with the fewest
// rows so far; ties go to the lower worker.
func balance(counts map[int]int, workers int) map[int]int {
	parts := make([]int, 0, len(counts))
	for p := range counts {
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(a, b int) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return a - b
	})
	load := make([]int, workers)
	out := make(map[int]int, len(parts))
	for _, p := range parts {
		w := 0
		for j := range load {
			if load[j] < load[w] {
				w = j
			}
		}
		out[p] = w
		load[w] += counts[p]
	}
	return out
}
