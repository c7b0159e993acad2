package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testpg"
)

// writers commits small transactions from n goroutines until stopped, a
// tenth of them rolled back. A transaction that fails before COMMIT
// committed nothing; one whose COMMIT fails may have committed, and is
// recorded as uncertain. Writers go on after errors: the database is
// expected to fail under them.
type writers struct {
	loops    *loops
	failures atomic.Int64
}

func startWriters(t *testing.T, h *harness.Harness, rec *chaos.Recorder, rnd *rand.Rand, n int) *writers {
	t.Helper()
	return startKeyedWriters(t, h, rec, rnd, n, "w")
}

// startKeyedWriters is startWriters with keys named prefix…, so that
// writers over several harnesses of one database keep keys apart.
func startKeyedWriters(t *testing.T, h *harness.Harness, rec *chaos.Recorder, rnd *rand.Rand, n int, prefix string) *writers {
	t.Helper()
	ws := &writers{}
	ws.loops = startLoops(rnd, n, func(w int, pr *rand.Rand) error {
		keys := make([]string, 1+pr.IntN(5))
		msgs := make([]outbox.Message, len(keys))
		for i := range keys {
			keys[i] = fmt.Sprintf("%s%d-%d", prefix, w, pr.IntN(10))
			msgs[i] = outbox.Message{Topic: "chaos.event", Key: keys[i], Payload: []byte(`{}`)}
		}
		rollback := pr.IntN(10) == 0
		ids, err := h.EnqueueHeld(context.Background(), msgs, 0, rollback)
		var ce *harness.CommitError
		switch {
		case errors.As(err, &ce):
			ws.failures.Add(1)
			rec.Uncertain(ids)
		case err != nil:
			ws.failures.Add(1)
			rec.RollBack(ids)
			time.Sleep(20 * time.Millisecond)
		case rollback:
			rec.RollBack(ids)
		default:
			rec.Commit(ids, keys)
		}
		// About 250 messages a second per writer: well within what a
		// relay drains on every database here, so the backlog a fault
		// leaves is the fault's, not the writers' outpacing.
		time.Sleep(time.Duration(len(msgs))*4*time.Millisecond + time.Duration(pr.IntN(3))*time.Millisecond)
		return nil
	})
	return ws
}

// halt stops the writers and waits for them.
func (ws *writers) halt() { _ = ws.loops.halt() }

// TestChaosRelayConnectionsKilled terminates a relay process's database
// connections (pg_terminate_backend) again and again, and now and then
// holds an exclusive lock on the outbox table (the first time for up to
// 30 s), while writers commit: nothing is
// lost, nothing rolled back arrives, no row is falsely sent.
func TestChaosRelayConnectionsKilled(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	const batch = 100
	dc := chaosDrivers[0]
	h := harness.New(t, dc)
	rec := &chaos.Recorder{}
	sink := newChaosSink(t, rec)
	app := fmt.Sprintf("outbox_chaos_%d", rnd.Uint32())
	relayURL := h.DB.URL + "&application_name=" + app
	relay := startChild(t, relayURL, sink.URL(), "conn-kill", batch, time.Second)
	ws := startWriters(t, h, rec, rnd, 2)

	ctx := context.Background()
	terminated, rounds, locks := 0, 5*scale, 0
	var longest time.Duration
	for i := range rounds {
		time.Sleep(time.Duration(300+rnd.IntN(500)) * time.Millisecond)
		if i%3 == 2 {
			// Block the relay's reads and settles (and the writers) for a while.
			tx, err := h.DB.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "LOCK TABLE outbox_messages IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			// The first lock is long — 3 s per scale step, 30 s under make
			// chaos: longer than the relay's lease, its publish timeout
			// and its statement retries — the later ones short.
			hold := 2 * time.Second
			if locks == 0 {
				hold = min(time.Duration(3*scale)*time.Second, 30*time.Second)
			}
			longest = max(longest, hold)
			time.Sleep(hold)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			locks++
			continue
		}
		var n int
		if err := h.DB.Pool.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		terminated += n
	}
	ws.halt()
	if terminated == 0 {
		t.Fatal("no relay connection was terminated: the scenario proved nothing")
	}
	res := chaosResult{scenario: "relay's connections terminated, table locked", broker: "webhook",
		faults: fmt.Sprintf("%d connections terminated, %d table locks, the longest %v", terminated, locks, longest), recovered: time.Now()}
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: rounds * childWorkers * batch}, 2*time.Minute)
	relay.Term(t)
}

// TestChaosDatabaseRestart runs a private PostgreSQL cluster on a spare
// port and crash-restarts it (pg_ctl restart -m immediate) under a relay
// process and writers: once it is back, everything committed arrives
// and no row is falsely sent. Commits cut by a restart are uncertain.
func TestChaosDatabaseRestart(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	pg := testpg.Start(t)
	dc := chaosDrivers[0]
	h := harnessOn(t, dc, pg.URL())

	restartUnderLoad(t, h, dc, rnd, 2*scale, "database crash-restarted", "restarts (-m immediate)", func() {
		pg.Ctl(t, "restart", "-m", "immediate")
	})
}

// restartUnderLoad runs a relay process and two writers over the
// database the test owns (h), restarts it n times with restart — each
// time at a random moment once deliveries have resumed after the last —
// and checks that the same relay process recovered by itself and that
// nothing was lost. Commits cut by a restart are uncertain.
func restartUnderLoad(t *testing.T, h *harness.Harness, dc harness.Case, rnd *rand.Rand, n int, scenario, how string, restart func()) {
	t.Helper()
	const batch = 100
	rec := &chaos.Recorder{}
	sink := newChaosSink(t, rec)
	relay := startChild(t, h.DB.URL, sink.URL(), "restart-"+dc.Name, batch, time.Second)
	ws := startWriters(t, h, rec, rnd, 2)
	delivered := func() int { _, d, _ := rec.Counts(); return d }
	since := 0
	for i := range n {
		relaytest.WaitFor(t, time.Minute, fmt.Sprintf("deliveries flowing (before restart %d)", i+1), func() bool { return delivered() > since })
		time.Sleep(time.Duration(500+rnd.IntN(1000)) * time.Millisecond)
		since = delivered()
		restart()
	}
	relaytest.WaitFor(t, time.Minute, "deliveries flowing after the last restart", func() bool { return delivered() > since })
	time.Sleep(500 * time.Millisecond)
	ws.halt()
	assertRunning(t, relay, "while its database restarted")
	res := chaosResult{scenario: scenario, broker: "webhook",
		faults: fmt.Sprintf("%d %s, %d writer errors", n, how, ws.failures.Load()), recovered: time.Now()}
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: n * childWorkers * batch}, 2*time.Minute)
	relay.Term(t)
}

// harnessOn is harness.New for driver case dc over a fresh schema of the
// PostgreSQL server at url (a private one) instead of the shared service.
func harnessOn(t *testing.T, dc harness.Case, url string) *harness.Harness {
	t.Helper()
	saved := testdb.PostgresURL
	testdb.PostgresURL = url
	defer func() { testdb.PostgresURL = saved }()
	return harness.New(t, dc)
}
