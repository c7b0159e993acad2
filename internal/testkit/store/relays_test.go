package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/adopt/adoptyaml"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
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

// TestAdoptedRelaysRegister: a relay of an adopted table registers with
// the table it serves and records its wake-up; the adopted store lists
// it, the outbox table's listing does not, and the relays of
// outbox_messages do not count it as one that might route their topics.
// Stopping forgets it.
func TestAdoptedRelaysRegister(t *testing.T) {
	for _, d := range []store.Dialect{store.Postgres, store.MySQL, store.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t, d)
			adopttest.Create(t, db, "laravel")
			p, err := adoptyaml.Load("laravel")
			if err != nil {
				t.Fatal(err)
			}
			st := db.Backend().Store
			a, err := adoptstore.New(st, p)
			if err != nil {
				t.Fatal(err)
			}
			routes := store.EncodeRoutes([]string{"order.*"})
			if live, err := a.Heartbeat(ctx, "adopted-1", routes, time.Minute); err != nil || len(live) != 1 || live[0].ID != "adopted-1" {
				t.Fatalf("adopted heartbeat: %v, %v; want itself alone", live, err)
			}
			if ok, err := a.RecordWake(ctx, "adopted-1", "probe 25ms"); err != nil || !ok {
				t.Fatalf("RecordWake = %v, %v", ok, err)
			}
			live, err := st.Heartbeat(ctx, "plain-1", store.EncodeRoutes([]string{"audit.*"}), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if got := relayIDs(live); !slices.Equal(got, []string{"plain-1"}) {
				t.Errorf("live relays of outbox_messages = %v, want plain-1 alone", got)
			}
			mine, err := a.Relays(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(mine) != 1 || mine[0].ID != "adopted-1" || mine[0].Source != "local_messages" || mine[0].Wake != "probe 25ms" ||
				!slices.Equal(mine[0].Routes, []string{"order.*"}) {
				t.Fatalf("adopted relays = %+v, want adopted-1 on local_messages with its wake and routes", mine)
			}
			if j := store.RelaysJSON(mine); j[0].Table != "local_messages" {
				t.Errorf("relay JSON table = %q", j[0].Table)
			}
			plain, err := st.Relays(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := relayIDs(plain); !slices.Equal(got, []string{"plain-1"}) {
				t.Errorf("relays of outbox_messages = %v, want plain-1 alone", got)
			}
			if err := a.DropRelay(ctx, "adopted-1"); err != nil {
				t.Fatal(err)
			}
			if mine, err := a.Relays(ctx); err != nil || len(mine) != 0 {
				t.Errorf("after the stop: %v, %v; want none", mine, err)
			}
		})
	}
}
