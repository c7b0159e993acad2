package relay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// TestUnroutedWaitsWhileAnotherRelayRoutesIt: a topic no route here
// matches goes dead at once while no other live relay routes it, and
// waits, uncharged, with its key's later messages held back, while one
// does or one's routes are unknown — until the grace runs out.
func TestUnroutedWaitsWhileAnotherRelayRoutesIt(t *testing.T) {
	known := func(id string, patterns ...string) store.Relay {
		return store.Relay{ID: id, Routes: patterns, RoutesKnown: true}
	}
	cases := []struct {
		name  string
		peers []store.Relay
		grace time.Duration
		wait  bool
	}{
		{"alone", []store.Relay{known("test", "order.*")}, time.Hour, false},
		{"others route other topics", []store.Relay{known("b", "order.*", "audit.>"), known("test", "order.*")}, time.Hour, false},
		{"another routes it", []store.Relay{known("b", "order.*", "invoice.*"), known("test", "order.*")}, time.Hour, true},
		{"another routes everything", []store.Relay{known("b", "*"), known("test", "order.*")}, time.Hour, true},
		{"another's routes are unknown", []store.Relay{{ID: "b"}, known("test", "order.*")}, time.Hour, true},
		{"grace ran out", []store.Relay{known("b", "invoice.>"), known("test", "order.*")}, time.Nanosecond, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &fakeStore{rows: []store.Row{
				row(1, "invoice.sent", "k1", ""),  // no route here
				row(2, "order.created", "k1", ""), // same key behind it
				row(3, "order.created", "k2", ""), // another key
			}}
			var sent []string
			r := newTestRelay(t, st, publishFunc(func(e *publisher.Envelope) error {
				sent = append(sent, e.ID)
				return nil
			}))
			r.cfg.NoRouteGrace = c.grace
			r.peers.set(c.peers)
			if c.grace == time.Nanosecond {
				// The topic's wait started a while ago.
				r.peers.since = map[string]time.Time{"invoice.sent": time.Now().Add(-time.Second)}
			}
			if _, err := r.round(context.Background(), &worker{batchSize: 100}); err != nil {
				t.Fatal(err)
			}
			out, ok := st.outcome(t, 1)
			if !ok {
				t.Fatal("no outcome for the unrouted message")
			}
			if !strings.Contains(out.Error, `no route for topic "invoice.sent"`) {
				t.Errorf("error %q does not say there is no route", out.Error)
			}
			if !c.wait {
				if out.Status != store.StatusDead || !out.CountAttempt {
					t.Fatalf("outcome %+v, want dead", out)
				}
				if strings.Join(sent, ",") != "m2,m3" {
					t.Errorf("published %v, want m2,m3", sent)
				}
				return
			}
			if out.Status != store.StatusPending || out.CountAttempt || out.Delay <= 0 {
				t.Fatalf("outcome %+v, want pending, uncharged, delayed", out)
			}
			if _, ok := st.outcome(t, 2); ok {
				t.Error("the key's next message was decided; it must wait behind the first")
			}
			if strings.Join(sent, ",") != "m3" {
				t.Errorf("published %v, want m3 alone", sent)
			}
		})
	}
}
