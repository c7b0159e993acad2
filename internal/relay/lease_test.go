package relay

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
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
}

func (f *leaseStore) Heartbeat(context.Context, string, time.Duration) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.live), nil
}

func (f *leaseStore) PruneRelays(context.Context, time.Duration) error { return nil }

func (f *leaseStore) Renew(context.Context, string, time.Duration) (int64, error) { return 0, nil }

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
	r := newTestRelay(t, st, publishFunc(func(*Envelope) error { return nil }))
	r.id = "b"
	r.own.parts = nil
	ctx := t.Context()
	if err := r.balance(ctx, 8, false); err != nil {
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
	if err := r.balance(ctx, 8, false); err != nil {
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
