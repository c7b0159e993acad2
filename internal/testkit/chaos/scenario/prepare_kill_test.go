//go:build outbox_failpoints

package scenario_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/testkit/harness"
)

// TestChaosPrepareKillQuarantined is TestChaosPoisonKillQuarantined with
// the process killed while the message is prepared (decoded, before any
// publish) rather than published: crash isolation covers that too, as a
// suspect published alone is charged before it is prepared. A supervisor
// restarts the relay each time it dies; after max_attempts such crashes
// the message is dead, everything else arrives, and no innocent message
// is charged more than the attempt that delivered it.
func TestChaosPrepareKillQuarantined(t *testing.T) {
	testKillQuarantined(t, failpoint.Prepare, "prepare-kill", "preparing one message kills the relay")
}

// testKillQuarantined runs a relay process that the failpoint point kills
// (SIGKILL) on one message among a backlog, restarted by a supervisor
// each time it dies: each crash halves the group the culprit hides in (at
// most a batch per worker), then it crashes max_attempts times alone and
// is dead; everything else arrives, charged one attempt.
func testKillQuarantined(t *testing.T, point, name, scenario string) {
	scale := chaosScale(t)
	const batch, maxAttempts = 100, 3
	eachDriverOf(t, killDrivers, func(t *testing.T, _ harness.Case, h *harness.Harness, rec *chaos.Recorder) {
		poison := poisonAmong(t, h, rec, 500*scale, maxAttempts)
		sink := newChaosSink(t, rec)
		spec := point + "=kill:" + poison
		bound := 2 + maxAttempts
		for n := 1; n < childWorkers*batch; n *= 2 {
			bound++
		}
		start := time.Now()
		c := startFaultyChild(t, h, sink.URL(), name, spec, batch, time.Second)
		restarts := 0
		for {
			committed, distinct, _ := rec.Counts()
			if distinct >= committed-1 && h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE "+h.DB.Status()+" = 'pending'") == 0 {
				break
			}
			select {
			case <-c.Done():
				if !c.KilledBy(syscall.SIGKILL) {
					t.Fatalf("relay ended with %v, not by the failpoint's SIGKILL", c.State())
				}
				restarts++
				if restarts > bound {
					t.Fatalf("the relay crashed %d times on one message: the crash loop did not end (bound %d)", restarts, bound)
				}
				c = startFaultyChild(t, h, sink.URL(), name, spec, batch, time.Second)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Since(start) > 3*time.Minute {
				t.Fatalf("not drained after 3 minutes and %d restarts", restarts)
			}
		}
		res := chaosResult{scenario: scenario, broker: "webhook",
			faults: fmt.Sprintf("SIGKILL on every attempt: %d restarts", restarts), recovered: time.Now()}
		rep := drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDead: 1, MaxDuplicates: restarts * childWorkers * batch}, time.Minute)
		if rep.Dead != 1 {
			t.Errorf("want exactly the poison message dead and undelivered: %s", rep)
		}
		if restarts < maxAttempts {
			t.Errorf("the relay crashed %d times: the failpoint never fired as often as the message has attempts", restarts)
		}
		status, attempts, lastErr := messageRow(t, h, poison)
		if status != "dead" || attempts != maxAttempts || !strings.Contains(lastErr, "relay stopped") {
			t.Errorf("poison message: %s after %d attempts: %q", status, attempts, lastErr)
		}
		if n := h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent' AND attempts <> 1"); n != 0 {
			t.Errorf("%d delivered messages were charged more than the attempt that delivered them", n)
		}
		t.Logf("%d restarts; %s", restarts, rep)
		c.Term(t)
	})
}
