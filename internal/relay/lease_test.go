package relay

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/publisher"
)

// leaseStore keeps the lease table of one database in memory for the
// lease loop: live is the membership Heartbeat reports, owner[p] the
// relay holding partition p. onHeld, when set, runs before Held answers
// and returns what it answers instead (a read racing a release).
type leaseStore struct {
	Store // nil: any other statement panics

	mu       sync.Mutex
	live     []string
	owner    map[int]string
	released [][]int
	onHeld   func(current []store.Lease) []store.Lease
	// renews and helds count the statements; renewedAt is when the last
	// renewal ran, so its leases last until renewedAt + the TTL.
	renews, helds int
	renewedAt     time.Time
}

func (f *leaseStore) Heartbeat(context.Context, string, string, time.Duration) ([]store.Relay, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]store.Relay, len(f.live))
	for i, id := range f.live {
		out[i] = store.Relay{ID: id}
	}
	return out, nil
}

func (f *leaseStore) PruneRelays(context.Context, time.Duration) error { return nil }

// Renew extends owner's leases (they never expire here) and counts them.
func (f *leaseStore) Renew(_ context.Context, owner string, _ time.Duration) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renews++
	f.renewedAt = time.Now()
	var n int64
	for _, o := range f.owner {
		if o == owner {
			n++
		}
	}
	return n, nil
}

func (f *leaseStore) Acquire(_ context.Context, owner string, parts []int, _ time.Duration) ([]store.Lease, error) {
	f.mu.Lock()
	for _, p := range parts {
		if f.owner[p] == "" {
			f.owner[p] = owner
		}
	}
	f.mu.Unlock()
	return f.Held(context.Background(), owner)
}

func (f *leaseStore) heldBy(owner string) []store.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.Lease
	for p := range 8 {
		if f.owner[p] == owner {
			out = append(out, store.Lease{Partition: p})
		}
	}
	return out
}

func (f *leaseStore) Held(_ context.Context, owner string) ([]store.Lease, error) {
	f.mu.Lock()
	f.helds++
	f.mu.Unlock()
	held := f.heldBy(owner)
	if f.onHeld != nil {
		return f.onHeld(held), nil
	}
	return held, nil
}

func (f *leaseStore) Release(_ context.Context, owner string, parts []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range parts {
		if f.owner[p] == owner {
			delete(f.owner, p)
		}
	}
	f.released = append(f.released, slices.Clone(parts))
	return nil
}

// TestReleaseRacingTheLeaseReadIsNotTakenBack: a relay gives up half its
// partitions when a second relay joins. The read of its leases that
// follows was answered before the release reached the database, but
// arrives after the release finished: the partitions it lists are no
// longer this relay's, and the other relay may already serve them. They
// must not come back into the relay's hands (it would publish their
// messages while the other relay does too).
func TestReleaseRacingTheLeaseReadIsNotTakenBack(t *testing.T) {
	st := &leaseStore{live: []string{"b"}, owner: map[int]string{}}
	r := newTestRelay(t, st, publishFunc(func(*publisher.Envelope) error { return nil }))
	r.id = "b"
	r.own.parts = nil
	ctx := t.Context()
	if _, _, err := r.balance(ctx, 8, false, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.own.snapshot(); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("alone, the relay holds %v, want every partition", got)
	}

	// Relay a joins ahead of b: b's share becomes the odd partitions.
	st.mu.Lock()
	st.live = []string{"a", "b"}
	st.mu.Unlock()
	stale := st.heldBy("b")
	st.onHeld = func([]store.Lease) []store.Lease {
		// The answer was read before the release; it arrives once the
		// release is done.
		deadline := time.Now().Add(10 * time.Second)
		for {
			r.own.mu.Lock()
			done := len(r.own.releasing) == 0
			r.own.mu.Unlock()
			if done || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		return stale
	}
	if _, _, err := r.balance(ctx, 8, false, true); err != nil {
		t.Fatal(err)
	}
	r.bg.Wait()
	got, _ := r.own.snapshot()
	if !slices.Equal(got, []int{1, 3, 5, 7}) {
		t.Fatalf("after a relay joined, b holds %v, want [1 3 5 7] (its share)", got)
	}
	for _, p := range []int{0, 2, 4, 6} {
		st.mu.Lock()
		o := st.owner[p]
		st.mu.Unlock()
		if o != "" {
			t.Fatalf("partition %d still leased to %q after b gave it up", p, o)
		}
	}
}

// TestSettledRelayNoticesALostLease: a relay alone and idle settles (it
// renews without reading its leases back); when another owner takes one
// of its partitions in the database, the renewal extends one lease fewer
// than the relay holds, and the relay stops holding that partition.
// Throughout, the relay never counts its leases valid past what the last
// renewal guarantees.
func TestSettledRelayNoticesALostLease(t *testing.T) {
	st := &leaseStore{live: []string{"b"}, owner: map[int]string{}}
	r := newTestRelay(t, st, publishFunc(func(*publisher.Envelope) error { return nil }))
	r.id = "b"
	r.own.parts, r.own.validUntil = nil, time.Time{}
	const ttl = 500 * time.Millisecond
	r.cfg.LeaseTTL = ttl
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.leaseLoop(ctx, 8)
	}()
	defer func() {
		cancel()
		<-done
	}()

	// wait polls cond, checking on the way that the relay's validity
	// stays within the database's guarantee.
	wait := func(what string, cond func(held []int) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r.own.mu.Lock()
			held, valid := slices.Clone(r.own.parts), r.own.validUntil
			r.own.mu.Unlock()
			st.mu.Lock()
			guaranteed := st.renewedAt.Add(ttl)
			st.mu.Unlock()
			if valid.After(guaranteed) {
				t.Fatalf("the relay counts its leases valid until %s, past the renewal's %s", valid.Format(time.StampMicro), guaranteed.Format(time.StampMicro))
			}
			if cond(held) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 30 s (holding %v)", what, held)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait("settled over every partition", func(held []int) bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		// Two renewals in a row without a read-back: settled.
		return len(held) == 8 && st.renews >= st.helds+2
	})

	st.mu.Lock()
	st.owner[3] = "other"
	st.mu.Unlock()
	wait("partition 3 given up", func(held []int) bool { return !slices.Contains(held, 3) })
	if got, ok := r.own.snapshot(); !ok || !slices.Equal(got, []int{0, 1, 2, 4, 5, 6, 7}) {
		t.Fatalf("after losing partition 3 the relay holds %v (valid %v), want the 7 others", got, ok)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.owner[3] != "other" {
		t.Fatalf("partition 3 is leased to %q, want the owner that took it", st.owner[3])
	}
}

// TestBalanceTrustsOnlyAnExactRenewal: without a read-back, balance keeps
// its partitions only when the renewal extended exactly as many leases as
// it holds; a renewal that counts fewer (a lease taken) or more (a lease
// of this id the relay does not know of) reads the leases back.
func TestBalanceTrustsOnlyAnExactRenewal(t *testing.T) {
	st := &leaseStore{live: []string{"b"}, owner: map[int]string{}}
	r := newTestRelay(t, st, publishFunc(func(*publisher.Envelope) error { return nil }))
	r.id = "b"
	r.own.parts = nil
	ctx := t.Context()
	if _, _, err := r.balance(ctx, 4, false, true); err != nil {
		t.Fatal(err)
	}
	quiet, read, err := r.balance(ctx, 4, false, false)
	if err != nil || !quiet || read {
		t.Fatalf("an exact renewal: quiet %v, read back %v, %v; want quiet without a read-back", quiet, read, err)
	}
	st.mu.Lock()
	st.owner[1] = "other"
	st.mu.Unlock()
	quiet, read, err = r.balance(ctx, 4, false, false)
	if got, _ := r.own.snapshot(); err != nil || quiet || !read || !slices.Equal(got, []int{0, 2, 3}) {
		t.Fatalf("a renewal short of one lease: quiet %v, read back %v, %v, holding %v; want a read-back leaving [0 2 3]", quiet, read, err, got)
	}
	// A lease of this id the relay does not hold (left by an earlier
	// process with the same id): the count is off by one, and the
	// read-back finds it and gives it up.
	st.mu.Lock()
	st.live = []string{"a", "b"}
	st.owner = map[int]string{1: "b", 3: "b"}
	st.mu.Unlock()
	r.own.mu.Lock()
	r.own.parts = []int{1, 3}
	r.own.mu.Unlock()
	if quiet, read, err = r.balance(ctx, 4, false, false); err != nil || !quiet || read {
		t.Fatalf("an exact renewal of b's share: quiet %v, read back %v, %v", quiet, read, err)
	}
	st.mu.Lock()
	st.owner[0] = "b"
	st.mu.Unlock()
	quiet, read, err = r.balance(ctx, 4, false, false)
	r.bg.Wait()
	if got, _ := r.own.snapshot(); err != nil || quiet || !read || !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("a renewal of one lease more than held: quiet %v, read back %v, %v, holding %v; want a read-back keeping [1 3]", quiet, read, err, got)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.owner[0] != "" {
		t.Fatalf("the stray lease on partition 0 is still %q's, want it released", st.owner[0])
	}
}

// TestLapsedLeasesAreSaid: rounds that find the relay's leases expired
// read nothing and say so once; the first round after a renewal says it
// reads again, and reads.
func TestLapsedLeasesAreSaid(t *testing.T) {
	st := &fakeStore{rows: []store.Row{row(1, "order.created", "k1", "")}}
	r := newTestRelay(t, st, publishFunc(func(*publisher.Envelope) error { return nil }))
	var logs syncbuf.Buffer
	r.log = slog.New(slog.NewTextHandler(&logs, nil))
	r.own.mu.Lock()
	r.own.validUntil = time.Now().Add(-time.Second)
	r.own.mu.Unlock()
	w := &worker{batchSize: 100, wake: make(chan struct{}, 1)}
	for range 3 {
		if n, err := r.round(t.Context(), w); n != -1 || err != nil {
			t.Fatalf("round over lapsed leases: %d, %v; want -1 (nothing held)", n, err)
		}
	}
	if got := strings.Count(logs.String(), "leases lapsed before their renewal completed"); got != 1 {
		t.Fatalf("the lapse said %d times, want once:\n%s", got, logs.String())
	}
	if st.reads != 0 {
		t.Fatalf("%d reads over lapsed leases", st.reads)
	}
	r.own.mu.Lock()
	r.own.validUntil = time.Now().Add(time.Hour)
	r.own.mu.Unlock()
	for range 2 {
		if _, err := r.round(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(logs.String(), "leases renewed; reading again"); got != 1 {
		t.Fatalf("the recovery said %d times, want once:\n%s", got, logs.String())
	}
	if _, ok := st.outcome(t, 1); !ok {
		t.Fatal("the row was not delivered once the leases were valid again")
	}
}
