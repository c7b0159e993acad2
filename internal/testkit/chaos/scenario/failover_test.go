package scenario_test

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testpg"
)

// TestChaosFailover runs a private PostgreSQL primary with a streaming
// standby (pg_basebackup -R) on ports of the tests' range. A relay
// process and two writers are given both hosts
// (postgres://A,B/…?target_session_attrs=read-write); while the relay
// drains a backlog and the writers commit, the primary is SIGKILLed with
// all its backends and the standby promoted (pg_ctl promote). The relay
// process finds the new primary by itself.
//
// With a synchronous standby every acknowledged commit is on it: lost 0,
// falsely-sent 0, duplicates within the rounds in flight. With an
// asynchronous one the database itself may lose the last commits (they
// were acknowledged by the old primary and never streamed): those rows
// are gone from the new primary, and the report tells them apart from
// anything the relay did — they are the only messages allowed to be
// missing, and only if they never arrived.
func TestChaosFailover(t *testing.T) {
	for _, sync := range []bool{true, false} {
		name := map[bool]string{true: "synchronous", false: "asynchronous"}[sync]
		t.Run(name, func(t *testing.T) { failover(t, sync, name) })
	}
}

func failover(t *testing.T, sync bool, kind string) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	const batch = 100
	primary := testpg.Start(t)
	standby := primary.Standby(t, "standby1", sync)
	state := "async"
	if sync {
		state = "sync"
	}
	relaytest.WaitFor(t, time.Minute, "the standby streaming ("+state+")", func() bool {
		return primary.SQL(t, "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'standby1' AND state = 'streaming' AND sync_state = '"+state+"'") == "1"
	})
	url := fmt.Sprintf("postgres://postgres@%s,%s/postgres?sslmode=disable&target_session_attrs=read-write", primary.Addr(), standby.Addr())
	dc := chaosDrivers[0]
	h := harnessOn(t, dc, url)
	rec := &chaos.Recorder{}
	backlog := 5000 * scale
	(&chaosProducer{h: h, rec: rec}).backlog(t, "pre", backlog, 100)
	sink := newChaosSink(t, rec)
	relay := startChild(t, h.DB.URL, sink.URL(), "failover-"+state, batch, time.Second)
	ws := startWriters(t, h, rec, rnd, 2)
	delivered := func() int { _, d, _ := rec.Counts(); return d }

	at := backlog/4 + rnd.IntN(backlog/2)
	relaytest.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d messages delivered before the kill", at), func() bool { return delivered() >= at })
	stalled := delivered()
	// Read by snapshots, a relay on a new server takes its recorded
	// cursors only up to their xmin (another boot may give the ids after
	// again): what was delivered beyond is delivered again. Counted before a
	// stall, whose cursors the standby never gets.
	covered := 0
	if h.DB.Snapshot {
		covered = h.DB.Count(t, `SELECT count(*) FROM outbox_messages AS m JOIN outbox_leases AS l USING (partition_no)
WHERE m.status = 'sent' OR (m.status = 'pending' AND m.outbox_txid < pg_snapshot_xmin(l.snap_lo))`)
	}
	if !sync {
		// On loopback an asynchronous standby is milliseconds behind;
		// across a network it may be seconds. The primary's WAL sender
		// is stopped for a second before the kill, as a stalled link
		// would hold it: what the primary commits meanwhile never
		// reaches the standby.
		stallReplication(t, primary)
		time.Sleep(time.Second)
	}
	primary.Kill(t)
	killed := time.Now()
	since := delivered()
	// The standby notices its primary is gone; an operator (or a failover
	// manager) promotes it a moment later.
	time.Sleep(time.Second)
	standby.Promote(t)
	promoted := time.Now()
	relaytest.WaitFor(t, 2*time.Minute, "deliveries from the new primary", func() bool { return delivered() > since+100 })
	resumed := time.Now()
	t.Logf("primary killed after %d deliveries; standby promoted %.1fs later; deliveries resumed %.1fs after the kill",
		since, promoted.Sub(killed).Seconds(), resumed.Sub(killed).Seconds())
	time.Sleep(time.Second)
	ws.halt()
	assertRunning(t, relay, "during the failover")

	// What the database itself lost: committed messages without a row on
	// the new primary, and how many of them the relay had delivered.
	status := tableStatus(t, h)
	hist := rec.History(status)
	arrived := map[string]bool{}
	for _, d := range hist.Delivered {
		arrived[d.ID] = true
	}
	gone, goneDelivered := 0, 0
	for _, c := range hist.Committed {
		if _, ok := status[c.ID]; !ok {
			gone++
			if arrived[c.ID] {
				goneDelivered++
			}
		}
	}
	t.Logf("the database lost %d committed rows in the failover (%d of them delivered before the kill, %d never)", gone, goneDelivered, gone-goneDelivered)
	if sync && gone > 0 {
		t.Errorf("a synchronous standby lost %d committed rows", gone)
	}
	res := chaosResult{scenario: "primary SIGKILLed, " + kind + " standby promoted", broker: "webhook",
		faults: fmt.Sprintf("1 SIGKILL mid-drain, promoted after %.1fs, deliveries again %.1fs after the kill, %d writer errors, %d rows lost by the database",
			promoted.Sub(killed).Seconds(), resumed.Sub(killed).Seconds(), ws.failures.Load(), gone),
		recovered: promoted}
	// A kill cuts short every worker's round, and the settles of the last
	// moments before it (committed without waiting for the WAL flush, so
	// neither flushed nor streamed) are forgotten: two rounds per worker.
	// Behind a stalled asynchronous standby the new primary also forgets
	// every settle of the stall: what was delivered meanwhile is pending
	// again there and delivered again.
	bound := 2 * childWorkers * batch
	if h.DB.Snapshot {
		bound += max(since-covered, 0)
		t.Logf("%d deliveries beyond the recorded cursors' xmin", since-covered)
	}
	if !sync {
		bound += since - stalled
		t.Logf("%d deliveries while replication stalled", since-stalled)
	}
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: bound, MaxLost: gone - goneDelivered}, 2*time.Minute)
	relay.Term(t)
}

// stallReplication SIGSTOPs the primary's WAL senders (the kill that
// follows ends them).
func stallReplication(t *testing.T, primary *testpg.Server) {
	t.Helper()
	for _, f := range strings.Fields(primary.SQL(t, "SELECT pid FROM pg_stat_replication")) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("the primary's WAL sender: %v", err)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
}
