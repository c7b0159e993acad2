package scenario_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// TestChaosDatabasePartition puts a fault proxy between a relay process
// and its database, while writers (connected directly) commit, and cuts
// the relay off for longer than its 1 s lease: nothing passes until the
// path heals (held), connections aborted with RST (reset), the database
// down (connections refused) — and, once the relay survives them,
// connections accepted with every byte dropped (blackholed) and
// half-open (the statements reach the database, the answers never come
// back). After each fault the relay must reconnect by itself and deliver
// again without being restarted, and log a bounded number of lines. Then
// nothing is lost, nothing rolled back arrives, no row is falsely sent.
func TestChaosDatabasePartition(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	const batch = 100
	// At most this many lines on the relay's stderr per fault: one or two
	// per worker and loop when a failure starts and ends, never one per
	// retry. The MySQL driver's own lines (one per failed connection
	// attempt) go to the relay's logger at debug level, as in `outbox
	// relay`, so they count too.
	const maxLinesPerFault = 50
	eachDriver(t, func(t *testing.T, dc harness.Case, h *harness.Harness, rec *chaos.Recorder) {
		sink := newChaosSink(t, rec)
		proxy, u := proxyURL(t, h.DB.URL, 0)
		id := "partition-" + dc.Name
		relay, logs := startLoggedChild(t, u.String(), sink.URL(), id, batch, time.Second)
		ws := startWriters(t, h, rec, rnd, 2)
		delivered := func() int { _, d, _ := rec.Counts(); return d }
		waitDelivering(t, relay, delivered, 0, "deliveries flowing")

		now := "now()"
		if h.DB.Dialect == store.MySQL {
			now = "NOW(6)"
		}
		heldLeases := func() int {
			return h.DB.Count(t, testdb.Placeholder(h.DB.Dialect, "SELECT count(*) FROM outbox_leases WHERE owner = ? AND expires_at > "+now), id)
		}
		hold := time.Duration(2*scale) * time.Second
		faults := []struct {
			name string
			mode faultproxy.Mode
			// lapses: no statement reaches the database, so the
			// relay's leases expire there.
			lapses bool
		}{
			{"held (nothing passes; the bytes go through once the path heals)", faultproxy.Blackhole, true},
			// A connection that swallows every byte, or that delivers
			// statements and drops their answers, stays dead after
			// the path heals: the relay's statement deadlines end the
			// wait and it goes on over fresh connections.
			{"blackholed (connections accepted, every byte dropped)", faultproxy.Drop, true},
			{"reset (connections aborted with RST)", faultproxy.Reset, true},
			{"half-open (statements arrive, answers dropped)", faultproxy.HalfOpen, false},
			{"down (connections refused)", faultproxy.Refuse, true},
		}
		var names []string
		for _, f := range faults {
			lines := logs.count()
			proxy.SetMode(f.mode)
			time.Sleep(hold)
			leases := heldLeases()
			proxy.SetMode(faultproxy.Pass)
			waitDelivering(t, relay, delivered, delivered()+50, "deliveries flowing again after "+f.name)
			logged, other := logs.since(lines)
			t.Logf("%s for %v: the relay still held %d leases at the end, logged %d lines (and %d more lines on stderr)", f.name, hold, leases, logged, other)
			if f.lapses && leases != 0 {
				t.Errorf("%s: %d leases still held after %v without the database: the lease TTL is 1 s", f.name, leases, hold)
			}
			if logged+other >= maxLinesPerFault {
				t.Errorf("%s: the relay wrote %d lines during the fault and its recovery (at most %d expected):\n%s",
					f.name, logged+other, maxLinesPerFault-1, logs.tail(lines, 20))
			}
			names = append(names, strings.Fields(f.name)[0])
		}
		ws.halt()
		assertRunning(t, relay, "instead of reconnecting by itself")
		res := chaosResult{scenario: "relay cut off from its database", broker: "webhook",
			faults: fmt.Sprintf("%d × %v: %s", len(names), hold, strings.Join(names, ", ")), recovered: time.Now()}
		drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: len(names) * childWorkers * batch}, 2*time.Minute)
		relay.Term(t)
	})
}

// waitDelivering waits up to a minute until more than after messages
// have arrived. A relay process that has not delivered by then is asked
// for its goroutines (SIGQUIT: the stacks go to its log) and the test
// fails; one that has ended fails it at once.
func waitDelivering(t *testing.T, c *child, delivered func() int, after int, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for delivered() <= after {
		if c.Exited() {
			t.Fatalf("%s: the relay process ended (%v)", what, c.State())
		}
		if time.Now().After(deadline) {
			_ = c.Signal(syscall.SIGQUIT)
			select {
			case <-c.Done():
			case <-time.After(10 * time.Second):
			}
			t.Fatalf("timed out after a minute waiting for %s (%d delivered, waiting for more than %d); the relay's goroutines are in its log above", what, delivered(), after)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startLoggedChild is startChild with the relay's log (its stderr)
// counted line by line, and still copied to the test's stderr.
func startLoggedChild(t *testing.T, dbURL, sinkURL, id string, batch int, ttl time.Duration) (*child, *lineLog) {
	t.Helper()
	cmd := childCommand(dbURL, sinkURL, id, batch, ttl)
	cmd.Env = append(cmd.Env, "GOTRACEBACK=all")
	logs := &lineLog{}
	cmd.Stderr = logs
	c := testserver.Spawn(t, cmd, "relay")
	return c, logs
}

// lineLog keeps the lines written to it and copies them to os.Stderr.
type lineLog struct {
	mu      sync.Mutex
	lines   []string
	partial []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	_, _ = os.Stderr.Write(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

// count is how many complete lines were written.
func (l *lineLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// since counts the lines written since line from: those of the relay's
// log (slog's text format, "time=… level=…") and the others.
func (l *lineLog) since(from int) (relay, other int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines[from:] {
		if strings.HasPrefix(line, "time=") {
			relay++
		} else {
			other++
		}
	}
	return relay, other
}

// tail is up to n of the lines written since line from, the last ones.
func (l *lineLog) tail(from, n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines[from:]
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
