package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/testdb"
)

// TestChaosStoppedRelayIsFenced freezes a relay (SIGSTOP) in the middle
// of publishing a batch until its leases lapse, lets another relay take
// its partitions, and thaws it (SIGCONT) while the new owner's delivery
// of the same messages is still in flight: the stale relay's failed
// publishes come back and its settle must change none of those rows.
func TestChaosStoppedRelayIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: -short")
	}
	scale := chaosScale(t)
	const batch, ttl = 100, time.Second
	for _, dc := range chaosDrivers {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc)
			rec := &chaos.Recorder{}
			(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 1000*scale, 20)
			sink := newChaosSink(t, rec)

			// The stale relay's requests are held and, later, refused.
			stale := newGate(nil, false)
			sink.gate.Store(stale)
			a := startFaultyChild(t, h, sink.URL(), "stale", "", batch, ttl)
			relaytest.WaitFor(t, time.Minute, "the first relay publishing", func() bool { return len(stale.heldIDs()) > 0 })
			time.Sleep(100 * time.Millisecond) // the rest of its wave
			if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
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
			b := startFaultyChild(t, h, sink.URL(), "heir", "", batch, ttl)
			relaytest.WaitFor(t, time.Minute, "the heir publishing the frozen relay's batch", func() bool { return len(heirs.heldIDs()) > 0 })

			// Thaw the stale relay: its publishes fail, and it settles them.
			stale.open()
			if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * ttl) // time to settle, renew and notice what it lost
			changed := h.db.Count(t, testdb.Placeholder(h.db.Dialect, "SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND (attempts > 0 OR last_error IS NOT NULL) AND message_id IN ('"+strings.Join(inflight, "','")+"')"))
			heirs.open()
			sink.gate.Store(nil)
			res := chaosResult{scenario: "SIGSTOP past the lease, heir takes over, SIGCONT", broker: "webhook",
				faults: fmt.Sprintf("1 SIGSTOP, %d messages in flight", len(inflight)), recovered: time.Now()}
			drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: childWorkers * batch}, 2*time.Minute)
			if changed != 0 {
				t.Errorf("the stale relay's settle changed %d of the %d rows it had lost", changed, len(inflight))
			}
			t.Logf("%d messages were in flight in the frozen relay; its settle changed %d rows", len(inflight), changed)
			a.term(t)
			b.term(t)
		})
	}
}

// TestChaosTermDuringDrain sends SIGTERM to a relay in the middle of a
// drain: it finishes its batch and exits 0 within ShutdownTimeout, and
// nothing arrives twice — also when the destination hangs and the batch
// cannot finish, which the next relay then delivers.
func TestChaosTermDuringDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: -short")
	}
	scale := chaosScale(t)
	const batch = 100
	for _, c := range []struct {
		dc   driverCase
		hang bool
	}{{chaosDrivers[0], false}, {chaosDrivers[0], true}, {chaosDrivers[1], false}} {
		hang := c.hang
		name := "slow destination"
		if hang {
			name = "hung destination"
		}
		t.Run(c.dc.name+"/"+name, func(t *testing.T) {
			h := newHarness(t, c.dc)
			rec := &chaos.Recorder{}
			n := 2000 * scale
			(&chaosProducer{h: h, rec: rec}).backlog(t, "k", n, 50)
			sink := newChaosSink(t, rec)
			sink.delay.Store(int64(2 * time.Millisecond))
			a := startFaultyChild(t, h, sink.URL(), "term", "", batch, time.Second)
			relaytest.WaitFor(t, time.Minute, "a third delivered", func() bool { _, d, _ := rec.Counts(); return d >= n/3 })
			var g *sinkGate
			if hang {
				g = newGate(nil, false)
				sink.gate.Store(g)
				relaytest.WaitFor(t, time.Minute, "requests hanging", func() bool { return len(g.heldIDs()) > 0 })
			}
			start := time.Now()
			_ = a.cmd.Process.Signal(syscall.SIGTERM)
			limit := outbox.DefaultShutdownTimeout + 10*time.Second // the margin is for a loaded machine
			select {
			case <-a.done:
			case <-time.After(limit):
				t.Fatalf("relay still running %v after SIGTERM (ShutdownTimeout %v)", limit, outbox.DefaultShutdownTimeout)
			}
			exit := time.Since(start)
			if code := a.cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("relay exited with %d after SIGTERM", code)
			}
			if g != nil {
				g.open()
				sink.gate.Store(nil)
			}
			t.Logf("exited %.1fs after SIGTERM", exit.Seconds())
			b := startFaultyChild(t, h, sink.URL(), "after-term", "", batch, time.Second)
			res := chaosResult{scenario: "SIGTERM during drain, " + name, broker: "webhook",
				faults: fmt.Sprintf("1 SIGTERM (exit after %.1fs)", exit.Seconds()), recovered: time.Now()}
			drainAndCheck(t, h, rec, res, chaos.Bounds{}, 2*time.Minute)
			b.term(t)
		})
	}
}

// TestChaosInjectedErrors fails each step of a round once, in process,
// through failpoints set with failpoint.Set: a failed read round, a
// message whose publish fails, a batch abandoned between waves and a
// failed settle. Each costs at most a retry or a redelivery of the batch.
func TestChaosInjectedErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: -short")
	}
	scale := chaosScale(t)
	for _, dc := range chaosDrivers {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc)
			rec := &chaos.Recorder{}
			(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 2000*scale, 10)
			spec := "after_read_before_publish=error@2;mid_batch=error@3;publish=error@50;before_settle=error@4;after_publish_before_settle=sleep:10ms@5"
			if err := failpoint.Set(spec); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = failpoint.Set("") })
			const batch = 100
			cfg := fastRelayConfig(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
				rec.Deliver(env.ID, env.Key)
				return nil
			})})
			cfg.BatchSize = batch
			cfg.Workers = 1
			r, err := h.newRelay(cfg)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			stop := relaytest.Run(t, r)
			res := chaosResult{scenario: "an injected error at each step", broker: "in-process", faults: spec, recovered: start}
			// Only the failed settle redelivers: one batch.
			drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: batch}, 2*time.Minute)
			stop()
			if h.db.Count(t, "SELECT count(*) FROM outbox_messages WHERE last_error LIKE '%injected fault%'") == 0 {
				t.Fatal("no message was retried after the injected publish error")
			}
		})
	}
}
