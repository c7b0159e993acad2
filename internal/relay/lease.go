package relay

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// ownership tracks the partitions this relay holds and until when its
// leases are surely valid by the local monotonic clock.
type ownership struct {
	mu         sync.Mutex
	parts      []int
	validUntil time.Time
	// suspect[p] is the highest id a previous owner of p (or this relay's
	// previous incarnation) may have been publishing when it stopped
	// without releasing p: the rows up to it are suspects (see isolate).
	suspect map[int]int64
	// releasing holds partitions given up but not yet released: they wait
	// for the in-flight round to settle.
	releasing map[int]bool

	// round is held shared by each worker for a whole read-publish-settle
	// round, and exclusively while partitions are released, so a partition
	// is never released under an in-flight batch.
	round sync.RWMutex
}

// snapshot returns the owned partitions if the leases are still valid.
func (o *ownership) snapshot() ([]int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.parts, len(o.parts) > 0 && time.Now().Before(o.validUntil)
}

func (o *ownership) valid() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return time.Now().Before(o.validUntil)
}

func (o *ownership) suspectUpTo(p int) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.suspect[p]
}

// suspects returns a copy of the suspect marks, nil when there are none.
func (o *ownership) suspects() map[int]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.suspect) == 0 {
		return nil
	}
	return maps.Clone(o.suspect)
}

// assigned is this relay's share: partition p goes to live[p % len(live)].
func assigned(id string, live []string, n int) []int {
	idx := slices.Index(live, id)
	if idx < 0 {
		return nil
	}
	var out []int
	for p := idx; p < n; p += len(live) {
		out = append(out, p)
	}
	return out
}

// Settled lease upkeep. While a relay is settled — its last renewal took
// and gave up nothing, and since then its workers read nothing and nothing
// woke it — it renews every settledTicks ticks of LeaseTTL/5 instead of
// every tick, and trusts a renewal that extended exactly the leases it
// holds instead of reading them back, except every readBackEvery
// renewals. An idle database then costs three statements (the heartbeat's
// two and the renewal) per 2·LeaseTTL/5 instead of four per LeaseTTL/5.
// Leases are still renewed more than
// twice per TTL, and validUntil still comes from the renewal's start.
const (
	settledTicks  = 2
	readBackEvery = 10
)

// noteLeases says once when rounds stop because the partitions the relay
// holds have passed their validity (a renewal slower than the lease TTL,
// or failing), and once when they read again: without it a relay whose
// renewals merely lag reads nothing without a word.
func (r *Relay) noteLeases(holds, valid bool) {
	switch {
	case holds && !valid:
		if r.lapsedAt.Load() == 0 && r.lapsedAt.CompareAndSwap(0, time.Now().UnixNano()) {
			r.log.Warn("outbox relay: leases lapsed before their renewal completed; nothing is read until one does", "relay", r.id, "lease_ttl", r.cfg.LeaseTTL)
		}
	case valid:
		if at := r.lapsedAt.Load(); at != 0 && r.lapsedAt.CompareAndSwap(at, 0) {
			r.log.Info("outbox relay: leases renewed; reading again", "relay", r.id, "stopped_for", time.Since(time.Unix(0, at)).Round(time.Millisecond))
		}
	}
}

// leaseLoop keeps this relay registered, renews its leases and moves
// partitions so every live relay holds its share.
func (r *Relay) leaseLoop(ctx context.Context, partitions int) {
	interval := r.cfg.LeaseTTL / 5
	t := time.NewTimer(interval)
	defer t.Stop()
	failing := false
	settled := false
	activity := r.activity.Load()
	sinceRead := 0
	for tick := 0; ; tick++ {
		// A statement lost in the network (its answer never comes)
		// must not stall the loop past the leases it keeps.
		bctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
		readBack := !settled || sinceRead+1 >= readBackEvery
		quiet, read, err := r.balance(bctx, partitions, tick%50 == 0, readBack)
		cancel()
		if err == nil {
			err = r.saveCursors(ctx, nil)
		}
		if err == nil {
			r.forgetSettledSuspects(ctx)
		}
		r.dbLeaseUpkeep(ctx, err)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			r.log.Error("outbox relay: lease renewal failing; publishing stops when the leases lapse", "relay", r.id, "err", err)
		case err == nil && failing:
			failing = false
			r.log.Info("outbox relay: lease renewal recovered", "relay", r.id)
		}
		if read {
			sinceRead = 0
		} else {
			sinceRead++
		}
		// Settled: this renewal changed nothing and, since the one
		// before, no round read a message and nothing woke the relay.
		now := r.activity.Load()
		settled = err == nil && quiet && now == activity
		activity = now
		// Only a settled relay's renewals go on the grid: those of busy
		// relays over many databases would otherwise all come due at the
		// same instant, each locking its leases in the middle of reads.
		wait := interval
		if settled {
			wait = onGrid(settledTicks * interval)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// balance renews the relay's registration and leases and moves
// partitions towards its share. Unless readBack, a renewal that extended
// exactly as many leases as the relay holds, with nothing to take or give
// up, is trusted without reading the leases back. It reports whether
// nothing changed (nothing taken, given up or lost) and whether it read
// the leases back.
func (r *Relay) balance(ctx context.Context, partitions int, prune, readBack bool) (quiet, read bool, err error) {
	st := r.store
	ttl := r.cfg.LeaseTTL
	start := time.Now()
	relays, err := st.Heartbeat(ctx, r.id, r.routes, ttl)
	if err != nil {
		return false, false, err
	}
	r.peers.set(relays)
	live := make([]string, len(relays))
	for i, rl := range relays {
		live[i] = rl.ID
	}
	if prune {
		if err := st.PruneRelays(ctx, 20*ttl); err != nil {
			return false, false, err
		}
	}
	renewed, err := st.Renew(ctx, r.id, ttl)
	if err != nil {
		return false, false, err
	}
	want := assigned(r.id, live, partitions)
	current, _ := r.own.snapshot()
	drop, take := diff(current, want), diff(want, current)
	if !readBack && len(drop) == 0 && len(take) == 0 && len(current) > 0 && renewed == int64(len(current)) && r.renewedAll(current) {
		// Every lease the relay holds was unexpired and is extended
		// from start on: the database guarantees them at least until
		// start+ttl, as a read-back would.
		r.own.mu.Lock()
		r.own.validUntil = start.Add(ttl - ttl/10)
		r.own.mu.Unlock()
		r.reportOwned(len(current))
		return true, false, nil
	}
	if len(drop) > 0 {
		r.release(ctx, drop)
	}
	var leases []store.Lease
	if len(take) > 0 {
		leases, err = st.Acquire(ctx, r.id, take, ttl)
	} else {
		leases, err = st.Held(ctx, r.id)
	}
	if err != nil {
		return false, true, err
	}
	before, held, stray := r.ownLeases(leases, want, start.Add(ttl-ttl/10))
	if len(stray) > 0 {
		r.release(ctx, stray)
	}
	r.reportOwned(len(held))
	changed := !slices.Equal(before, held)
	if changed {
		gained, lost := diff(held, before), diff(before, held)
		r.log.Info("outbox relay: partitions changed", "relay", r.id, "held", len(held), "gained", len(gained), "lost", len(lost), "live_relays", len(live))
		r.wakeSelf()
	}
	return !changed && len(drop) == 0 && len(take) == 0 && len(stray) == 0, true, nil
}

// ownLeases makes the leases read back, but those being released, what the
// relay holds until validUntil. It returns the partitions held before and
// now, and the stray leases outside want that it does not hold, for the
// caller to release. A partition newly held keeps the in-flight mark its
// lease carries as a suspect (see isolate).
func (r *Relay) ownLeases(leases []store.Lease, want []int, validUntil time.Time) (before, held, stray []int) {
	held = make([]int, 0, len(leases))
	r.own.mu.Lock()
	defer r.own.mu.Unlock()
	before = r.own.parts
	if r.own.suspect == nil {
		r.own.suspect = map[int]int64{}
	}
	for _, l := range leases {
		if r.own.releasing[l.Partition] {
			continue
		}
		if !slices.Contains(want, l.Partition) {
			// Not this relay's share: a lease the read above found
			// before a release finished (the partition may belong to
			// another relay already), or one an earlier process with
			// this id left. Holding it would publish for a partition
			// another relay serves; it is released instead.
			stray = append(stray, l.Partition)
			continue
		}
		held = append(held, l.Partition)
		if !slices.Contains(before, l.Partition) {
			// A mark left on a partition this process did not hold was
			// left by a relay that stopped mid-round without releasing
			// it: another relay, or an earlier process with the same id.
			delete(r.own.suspect, l.Partition)
			if l.InflightMaxID > 0 {
				r.own.suspect[l.Partition] = l.InflightMaxID
			}
		}
	}
	r.own.parts = held
	r.own.validUntil = validUntil
	if r.snap != nil {
		r.snap.held(leases, held, r.own.releasing)
	}
	return before, held, stray
}

// renewedAll reports whether parts are still exactly what the relay
// holds, with no release in flight (a lease being released is still the
// relay's in the database, so the renewal counted it).
func (r *Relay) renewedAll(parts []int) bool {
	r.own.mu.Lock()
	defer r.own.mu.Unlock()
	return len(r.own.releasing) == 0 && slices.Equal(r.own.parts, parts)
}

// diff is a minus b.
func diff(a, b []int) []int {
	var out []int
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// release gives up parts: they leave the worker's view at once and are
// released in the database once the in-flight round has settled, without
// holding up lease renewal.
func (r *Relay) release(ctx context.Context, parts []int) {
	r.own.mu.Lock()
	if r.own.releasing == nil {
		r.own.releasing = map[int]bool{}
	}
	var fresh []int
	for _, p := range parts {
		if !r.own.releasing[p] {
			r.own.releasing[p] = true
			fresh = append(fresh, p)
		}
	}
	r.own.parts = slices.DeleteFunc(slices.Clone(r.own.parts), func(p int) bool { return r.own.releasing[p] })
	r.own.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.own.round.Lock()
		if err := r.flushCarried(ctx); err != nil {
			r.log.Warn("outbox relay: settling the last round before releasing partitions failed; its messages will be delivered again", "relay", r.id, "err", err)
		}
		if err := r.saveCursors(context.WithoutCancel(ctx), fresh); err != nil {
			r.log.Warn("outbox relay: recording where the snapshot read stands failed; the next owner reads the last rounds again", "relay", r.id, "err", err)
		}
		if r.snap != nil {
			r.snap.forget(fresh)
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.statementTimeout())
		err := r.store.Release(rctx, r.id, fresh)
		cancel()
		r.own.round.Unlock()
		if err != nil {
			r.log.Warn("outbox relay: releasing partitions failed; they move when the lease expires", "relay", r.id, "err", err)
		}
		r.own.mu.Lock()
		for _, p := range fresh {
			delete(r.own.releasing, p)
		}
		r.own.mu.Unlock()
	}()
}
