package brokertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// The flow of the outage test: 600 messages over 25 keys, 5 a
// transaction, one transaction every 125 ms (about 15 s, across the
// 10 s outage), which starts once 100 messages have arrived.
const (
	outageTotal  = 600
	outageKeys   = 25
	outagePerTx  = 5
	outagePause  = 125 * time.Millisecond
	outageBefore = 100
	outageHold   = 10 * time.Second
)

// Outage is a way for a broker to go away and come back.
type Outage struct {
	// Name names the subtest.
	Name string
	// Start prepares a broker (usually one of the test's own) that can be
	// taken down, with a destination on it.
	Start func(t *testing.T) *OutageTarget
}

// OutageTarget is a destination whose broker can be taken down.
type OutageTarget struct {
	// Publisher publishes to the broker; the relay routes every topic to
	// it.
	Publisher outbox.Publisher
	// Destination is the topic the flow is enqueued with (and the
	// destination it is delivered to).
	Destination string
	// Arrivals is everything that arrived at Destination so far, in
	// arrival order, redeliveries included. It is not called between Down
	// and Up.
	Arrivals func(t *testing.T) []publishertest.Received
	// Down takes the broker away: a crash, or every connection cut and
	// refused.
	Down func(t *testing.T)
	// Up brings it back at the same address.
	Up func(t *testing.T)
	// MaxAttempts bounds the attempts any message may count: the one in
	// flight when the broker went away, and perhaps one whose outcome was
	// lost with it. The outage itself must count none. Required.
	MaxAttempts int
	// TransientFailures: while going down the broker may fail a publish
	// as transient (an attempt counted, bounded by MaxAttempts), not only
	// as unavailable or unknown.
	TransientFailures bool
	// Check runs at the end with what arrived, for what only this broker
	// promises. Optional.
	Check func(t *testing.T, arrivals []publishertest.Received)
}

// classCounter counts the failures of a publisher by class.
type classCounter struct {
	outbox.Publisher
	unavailable, unknown, other atomic.Int32
}

func (c *classCounter) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	errs := c.Publisher.Publish(ctx, batch)
	for _, err := range errs {
		switch {
		case err == nil:
		case publisher.Classify(err) == publisher.ClassUnavailable:
			c.unavailable.Add(1)
		case publisher.Classify(err) == publisher.ClassUnknown:
			c.unknown.Add(1)
		default:
			c.other.Add(1)
		}
	}
	return errs
}

// distinctIDs is the set of message ids among rs.
func distinctIDs(rs []publishertest.Received) map[string]bool {
	ids := make(map[string]bool, len(rs))
	for _, r := range rs {
		ids[r.ID] = true
	}
	return ids
}

// RunOutage runs the outage test for each way the broker can go away, in
// parallel: a real relay over PostgreSQL delivers a steady flow; the
// broker goes down for 10 s and comes back. Messages are committed while
// it is down; the relay finds it unavailable and defers instead of
// counting attempts; no failure is anything but unavailable or unknown
// (or transient, where the target allows it);
// nothing goes dead; in the end every message arrived, every message
// marked sent is among the arrivals, and each key's messages first
// arrived in order.
func RunOutage(t *testing.T, outages ...Outage) {
	t.Helper()
	for _, o := range outages {
		t.Run(o.Name, func(t *testing.T) {
			if testing.Short() {
				t.Skip("the outage lasts 10 s")
			}
			t.Parallel()
			outage(t, o.Start(t))
		})
	}
}

func outage(t *testing.T, o *OutageTarget) {
	db := testdb.New(t, store.Postgres)
	pub := &classCounter{Publisher: o.Publisher}
	var deferred atomic.Int64
	cfg := relayConfig(pub)
	cfg.OnBatch = func(r outbox.BatchReport) { deferred.Add(int64(r.Deferred)) }
	relaytest.Start(t, db, cfg)
	enq := relaytest.NewEnqueuer(t, db)
	produced := enq.Flow(o.Destination, outageTotal, outagePerTx, outageKeys, outagePause)

	relaytest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d messages before the outage", outageBefore), func() bool {
		return len(distinctIDs(o.Arrivals(t))) >= outageBefore
	})
	before, atDown := len(distinctIDs(o.Arrivals(t))), len(enq.IDs())
	o.Down(t)
	down := time.Now()
	relaytest.WaitFor(t, outageHold, "the relay to find the broker unavailable", func() bool {
		return pub.unavailable.Load() > 0 || deferred.Load() > 0
	})
	time.Sleep(time.Until(down.Add(outageHold))) // hold the outage open
	if n := relaytest.Count(t, db, "dead"); n != 0 {
		t.Fatalf("%d messages dead during the outage", n)
	}
	atUp, pendingAtUp := len(enq.IDs()), relaytest.Count(t, db, "pending")
	o.Up(t)
	t.Logf("broker down for %v: %d messages arrived before; %d enqueued before, %d during; %d pending when it came back",
		time.Since(down).Round(time.Millisecond), before, atDown, atUp-atDown, pendingAtUp)
	if atUp == atDown || pendingAtUp == 0 {
		t.Fatal("the flow did not go on across the outage")
	}
	if err := <-produced; err != nil {
		t.Fatalf("enqueue: %v", err)
	}

	want := enq.IDs()
	var arrivals []publishertest.Received
	relaytest.WaitFor(t, 120*time.Second, fmt.Sprintf("all %d messages to arrive", outageTotal), func() bool {
		arrivals = o.Arrivals(t)
		ids := distinctIDs(arrivals)
		for _, id := range want {
			if !ids[id] {
				return false
			}
		}
		return true
	})
	relaytest.WaitFor(t, 30*time.Second, "every row marked sent", func() bool { return relaytest.Count(t, db, "sent") == outageTotal })
	checkAfterOutage(t, db, o, pub, arrivals)
	if deferred.Load() == 0 {
		t.Errorf("the relay never deferred a message as unavailable: was the outage noticed?")
	}
	t.Logf("%d arrivals of %d messages; %d deferred; publish failures: %d unavailable, %d unknown, %d other",
		len(arrivals), outageTotal, deferred.Load(), pub.unavailable.Load(), pub.unknown.Load(), pub.other.Load())
}

// checkAfterOutage checks the rows and the arrivals once everything is
// sent.
func checkAfterOutage(t *testing.T, db *testdb.DB, o *OutageTarget, pub *classCounter, arrivals []publishertest.Received) {
	t.Helper()
	if n := relaytest.Count(t, db, "dead"); n != 0 {
		t.Errorf("%d messages dead after the outage", n)
	}
	ids := distinctIDs(arrivals)
	sent := relaytest.SentIDs(t, db)
	for _, id := range sent {
		if !ids[id] {
			t.Errorf("message %s is marked sent but never arrived", id)
		}
	}
	if len(sent) != outageTotal || len(ids) != outageTotal {
		t.Errorf("%d rows sent, %d distinct ids arrived; want %d", len(sent), len(ids), outageTotal)
	}
	if n := db.Count(t, "SELECT max(attempts) FROM outbox_messages"); n > o.MaxAttempts {
		t.Errorf("a message took %d attempts (at most %d allowed): the outage burnt attempts", n, o.MaxAttempts)
	}
	if n := pub.other.Load(); n != 0 && !o.TransientFailures {
		t.Errorf("%d publish failures were neither unavailable nor unknown", n)
	}
	var order relaytest.KeyOrder // judged on first arrivals
	for _, r := range arrivals {
		order.Check(t, r.ID, r.Payload)
	}
	if o.Check != nil {
		o.Check(t, arrivals)
	}
}
