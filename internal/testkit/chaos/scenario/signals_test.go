package scenario_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestChaosStoppedRelayIsFenced freezes a relay (SIGSTOP) in the middle
// of publishing a batch until its leases lapse, lets another relay take
// its partitions, and thaws it (SIGCONT) while the new owner's delivery
// of the same messages is still in flight: the stale relay's failed
// publishes come back and its settle must change none of those rows.
func TestChaosStoppedRelayIsFenced(t *testing.T) {
	scale := chaosScale(t)
	const batch, ttl = 100, time.Second
	eachDriver(t, func(t *testing.T, dc harness.Case, h *harness.Harness, rec *chaos.Recorder) {
		(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 1000*scale, 20)
		sink := newChaosSink(t, rec)

		// The stale relay's requests are held and, later, refused.
		stale := newGate(nil, false)
		sink.gate.Store(stale)
		a := startChild(t, h.DB.URL, sink.URL(), "stale", batch, ttl)
		relaytest.WaitFor(t, time.Minute, "the first relay publishing", func() bool { return len(stale.heldIDs()) > 0 })
		time.Sleep(100 * time.Millisecond) // the rest of its wave
		if err := a.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		inflight := stale.heldIDs()

		// The heir's delivery of those messages waits at a gate of its own.
		set := map[string]bool{}
		for _, id := range inflight {
			set[id] = true
		}
		heirs := newGate(set, true)
		sink.gate.Store(heirs)
		b := startChild(t, h.DB.URL, sink.URL(), "heir", batch, ttl)
		relaytest.WaitFor(t, time.Minute, "the heir publishing the frozen relay's batch", func() bool { return len(heirs.heldIDs()) > 0 })

		// Thaw the stale relay: its publishes fail, and it settles them.
		stale.open()
		if err := a.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * ttl) // time to settle, renew and notice what it lost
		changed := h.DB.Count(t, testdb.Placeholder(h.DB.Dialect, "SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND (attempts > 0 OR last_error IS NOT NULL) AND message_id IN ('"+strings.Join(inflight, "','")+"')"))
		heirs.open()
		sink.gate.Store(nil)
		res := chaosResult{scenario: "SIGSTOP past the lease, heir takes over, SIGCONT", broker: "webhook",
			faults: fmt.Sprintf("1 SIGSTOP, %d messages in flight", len(inflight)), recovered: time.Now()}
		drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: childWorkers * batch}, 2*time.Minute)
		if changed != 0 {
			t.Errorf("the stale relay's settle changed %d of the %d rows it had lost", changed, len(inflight))
		}
		t.Logf("%d messages were in flight in the frozen relay; its settle changed %d rows", len(inflight), changed)
		a.Term(t)
		b.Term(t)
	})
}

// TestChaosTermDuringDrain sends SIGTERM to a relay in the middle of a
// drain: it finishes its batch and exits 0 within ShutdownTimeout, and
// nothing arrives twice — also when the destination hangs and the batch
// cannot finish, which the next relay then delivers.
func TestChaosTermDuringDrain(t *testing.T) {
	scale := chaosScale(t)
	const batch = 100
	for _, c := range []struct {
		dc   harness.Case
		hang bool
	}{{chaosDrivers[0], false}, {chaosDrivers[0], true}, {chaosDrivers[1], false}} {
		hang := c.hang
		name := "slow destination"
		if hang {
			name = "hung destination"
		}
		t.Run(c.dc.Name+"/"+name, func(t *testing.T) {
			h := harness.New(t, c.dc)
			rec := &chaos.Recorder{}
			n := 2000 * scale
			(&chaosProducer{h: h, rec: rec}).backlog(t, "k", n, 50)
			sink := newChaosSink(t, rec)
			sink.delay.Store(int64(2 * time.Millisecond))
			a := startChild(t, h.DB.URL, sink.URL(), "term", batch, time.Second)
			relaytest.WaitFor(t, time.Minute, "a third delivered", func() bool { _, d, _ := rec.Counts(); return d >= n/3 })
			var g *sinkGate
			if hang {
				g = newGate(nil, false)
				sink.gate.Store(g)
				relaytest.WaitFor(t, time.Minute, "requests hanging", func() bool { return len(g.heldIDs()) > 0 })
			}
			start := time.Now()
			_ = a.Signal(syscall.SIGTERM)
			limit := outbox.DefaultShutdownTimeout + 10*time.Second // the margin is for a loaded machine
			select {
			case <-a.Done():
			case <-time.After(limit):
				t.Fatalf("relay still running %v after SIGTERM (ShutdownTimeout %v)", limit, outbox.DefaultShutdownTimeout)
			}
			exit := time.Since(start)
			if code := a.State().ExitCode(); code != 0 {
				t.Fatalf("relay exited with %d after SIGTERM", code)
			}
			if g != nil {
				g.open()
				sink.gate.Store(nil)
			}
			t.Logf("exited %.1fs after SIGTERM", exit.Seconds())
			b := startChild(t, h.DB.URL, sink.URL(), "after-term", batch, time.Second)
			res := chaosResult{scenario: "SIGTERM during drain, " + name, broker: "webhook",
				faults: fmt.Sprintf("1 SIGTERM (exit after %.1fs)", exit.Seconds()), recovered: time.Now()}
			drainAndCheck(t, h, rec, res, chaos.Bounds{}, 2*time.Minute)
			b.Term(t)
		})
	}
}
