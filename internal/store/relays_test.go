package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// TestHeartbeatRecordsRoutes: each heartbeat records the relay's route
// patterns, the live relays come back with theirs, a relay that recorded
// none (an earlier version) has unknown routes, and the listing gives
// every relay with its fingerprint.
func TestHeartbeatRecordsRoutes(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		oldRoutes := store.EncodeRoutes([]string{"order.*"})
		newRoutes := store.EncodeRoutes([]string{"order.*", "audit.>"})
		if _, err := st.Heartbeat(ctx, "a", oldRoutes, time.Minute); err != nil {
			t.Fatal(err)
		}
		db.Exec(t, "INSERT INTO outbox_relays (relay_id, seen_at) SELECT 'c', seen_at FROM outbox_relays WHERE relay_id = 'a'")
		live, err := st.Heartbeat(ctx, "b", newRoutes, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := relayIDs(live); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("live = %v, want a, b, c", got)
		}
		a, b, c := live[0], live[1], live[2]
		if !a.RoutesKnown || !slices.Equal(a.Routes, []string{"order.*"}) {
			t.Errorf("a: routes %v known %v, want [order.*]", a.Routes, a.RoutesKnown)
		}
		if !b.RoutesKnown || !slices.Equal(b.Routes, []string{"order.*", "audit.>"}) {
			t.Errorf("b: routes %v known %v, want [order.* audit.>]", b.Routes, b.RoutesKnown)
		}
		if c.RoutesKnown || c.Fingerprint != "" {
			t.Errorf("c recorded no routes, yet known %v fingerprint %q", c.RoutesKnown, c.Fingerprint)
		}
		if a.Fingerprint == "" || a.Fingerprint == b.Fingerprint {
			t.Errorf("fingerprints a %q b %q: want different, non-empty", a.Fingerprint, b.Fingerprint)
		}
		// A relay restarted with other routes records them.
		live, err = st.Heartbeat(ctx, "a", newRoutes, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if live[0].Fingerprint != live[1].Fingerprint {
			t.Errorf("a restarted with b's routes: fingerprints %q and %q", live[0].Fingerprint, live[1].Fingerprint)
		}
		all, err := st.Relays(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := relayIDs(all); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("Relays = %v, want a, b, c", got)
		}
		for _, r := range all {
			if r.SeenAgo < 0 || r.SeenAgo > time.Minute {
				t.Errorf("relay %s seen %s ago, want within the minute of the test", r.ID, r.SeenAgo)
			}
		}
	})
}
