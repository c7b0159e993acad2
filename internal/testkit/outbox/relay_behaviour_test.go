package outbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
)

func listOne(t *testing.T, h *harness.Harness, id string) store.Message {
	t.Helper()
	ms, err := h.DB.Store().List(context.Background(), store.Filter{MessageIDs: []string{id}})
	if err != nil || len(ms) != 1 {
		t.Fatalf("list %s: %v (%d rows)", id, err, len(ms))
	}
	return ms[0]
}

func TestRelayBackoffScheduleDeadAndRequeue(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		schedule := []time.Duration{150 * time.Millisecond, 300 * time.Millisecond, 450 * time.Millisecond}
		var mu sync.Mutex
		var attempts []time.Time
		var healthy atomic.Bool
		delivered := make(chan string, 1)
		pub := outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
			if healthy.Load() {
				delivered <- env.ID
				return nil
			}
			mu.Lock()
			attempts = append(attempts, time.Now())
			mu.Unlock()
			return errors.New("downstream said no")
		})
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: pub, Retry: &outbox.RetryPolicy{Schedule: schedule}})
		r := newRelay(t, h, cfg)
		m := outbox.Message{Topic: "pay.done", Payload: []byte(`{}`), MaxAttempts: 4}
		ids := enqueue(t, h, context.Background(), []outbox.Message{m})
		relaytest.Run(t, r)
		relaytest.WaitFor(t, 20*time.Second, "message dead", func() bool { return listOne(t, h, ids[0]).Status == "dead" })
		row := listOne(t, h, ids[0])
		if row.Attempts != 4 || !strings.Contains(row.LastError, "max attempts (4)") || !strings.Contains(row.LastError, "downstream said no") {
			t.Fatalf("dead row: attempts %d, last_error %q", row.Attempts, row.LastError)
		}
		mu.Lock()
		got := append([]time.Time(nil), attempts...)
		mu.Unlock()
		if len(got) != 4 {
			t.Fatalf("%d attempts, want 4", len(got))
		}
		for i := 1; i < len(got); i++ {
			// Database-time scheduling: the next attempt never comes before
			// the schedule allows (2 ms for SQLite's millisecond clock).
			if gap := got[i].Sub(got[i-1]); gap < schedule[i-1]-2*time.Millisecond {
				t.Errorf("gap %d = %v, schedule says %v", i, gap, schedule[i-1])
			}
		}
		healthy.Store(true)
		n, err := h.DB.Store().Requeue(context.Background(), store.Filter{MessageIDs: ids})
		if err != nil || n != 1 {
			t.Fatalf("requeue: %d %v", n, err)
		}
		select {
		case id := <-delivered:
			if id != ids[0] {
				t.Fatalf("delivered %s", id)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("requeued message not delivered")
		}
		relaytest.WaitFor(t, 10*time.Second, "sent", func() bool { return listOne(t, h, ids[0]).Status == "sent" })
	})
}

// TestRelayJitterStaysUnderCeiling: with the exponential backoff's full
// jitter, the first retries of messages failing together are spread over
// [0, Base), on the database's clock.
func TestRelayJitterStaysUnderCeiling(t *testing.T) {
	h := harness.New(t, harness.Cases[0])
	policy := outbox.RetryPolicy{Base: 10 * time.Second, Cap: time.Minute}
	// The a.b messages fail and the others go through in the same call,
	// so the failures are the messages' (a destination failing them all
	// would be down, and charge nothing). They alternate, so that any
	// part of them a round reads holds both.
	pub := outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
		if env.Topic == "a.b" {
			return errors.New("nope")
		}
		return nil
	})
	r := newRelay(t, h, &outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "*", Publisher: pub}}, Retry: policy,
		Workers: 1, Logger: relaytest.Logger()})
	failing, passing := msgs(20, "a.b", nil), msgs(20, "a.ok", nil)
	var both []outbox.Message
	for i := range failing {
		both = append(both, failing[i], passing[i])
	}
	enqueue(t, h, context.Background(), both)
	relaytest.Run(t, r)
	relaytest.WaitFor(t, 20*time.Second, "every a.b message charged an attempt", func() bool {
		return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 'a.b' AND attempts >= 1") == 20
	})
	// The failures were settled in the statement that settled the
	// successes beside them, at their sent_at: each next attempt is that
	// plus its delay, drawn from [0, 10 s). A message whose draw was short
	// may have been tried again since (attempts 2): it is left out.
	var n int
	var lo, hi float64
	if err := h.DB.SQL.QueryRow(`SELECT count(*), COALESCE(min(extract(epoch from m.available_at - s.at)), 0), COALESCE(max(extract(epoch from m.available_at - s.at)), 0)
FROM outbox_messages AS m, (SELECT max(sent_at) AS at FROM outbox_messages WHERE topic = 'a.ok') AS s
WHERE m.topic = 'a.b' AND m.attempts = 1`).Scan(&n, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if n < 2 || hi >= 10 || lo < -1 || hi-lo < 0.5 {
		t.Fatalf("%d first retries due in [%.2f s, %.2f s] after their failure: want several, spread within [0, 10 s)", n, lo, hi)
	}
}

// failingRouteRelay is a relay on h with two routes: every publish to
// the topics of failing fails with err, and those of delivering arrive in
// the returned sink.
func failingRouteRelay(t *testing.T, h *harness.Harness, failing string, err error, delivering string) (*outbox.Relay, *sink) {
	t.Helper()
	s := newSink()
	return newRelay(t, h, harness.Config(
		outbox.Route{Pattern: failing, Publisher: outbox.PublisherFunc(func(context.Context, *outbox.Envelope) error { return err })},
		outbox.Route{Pattern: delivering, Publisher: outbox.PublisherFunc(s.publish)},
	)), s
}

func TestRelayPermanentNoRouteAndOversizedGoDead(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		r, s := failingRouteRelay(t, h, "bad.*", publisher.Permanent(errors.New("HTTP 400: bad order")), "good.>")
		ctx := context.Background()
		bad := enqueue(t, h, ctx, []outbox.Message{{Topic: "bad.order", Payload: []byte(`1`)}})
		lost := enqueue(t, h, ctx, []outbox.Message{{Topic: "nowhere", Payload: []byte(`1`)}})
		// A foreign producer writes a 2 MiB payload past the limit.
		h.DB.Exec(t, testdb.Placeholder(h.DB.Dialect, "INSERT INTO outbox_messages (topic, payload) VALUES ('good.big', ?)"), `"`+strings.Repeat("x", 2<<20)+`"`)
		good := enqueue(t, h, ctx, msgs(50, "good.one", nil))
		relaytest.Run(t, r)
		relaytest.WaitFor(t, 20*time.Second, "good messages", func() bool { return s.distinct() == len(good) })
		relaytest.WaitFor(t, 20*time.Second, "three dead", func() bool {
			return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead'") == 3
		})
		if row := listOne(t, h, bad[0]); row.Attempts != 1 || !strings.Contains(row.LastError, "bad order") {
			t.Errorf("permanent failure: %+v", row)
		}
		if row := listOne(t, h, lost[0]); !strings.Contains(row.LastError, "no route") {
			t.Errorf("no route: %q", row.LastError)
		}
		var big string
		if err := h.DB.SQL.QueryRow("SELECT last_error FROM outbox_messages WHERE topic = 'good.big'").Scan(&big); err != nil || !strings.Contains(big, "payload too large") {
			t.Errorf("oversized: %q %v", big, err)
		}
	})
}

func TestRelayCommitOrderDiffersFromIDOrder(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		if h.DB.Dialect == store.SQLite {
			t.Skip("SQLite has one writer: a transaction cannot hold an id while another commits")
		}
		s := newSink()
		r := newRelay(t, h, harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(s.publish)}))
		relaytest.Run(t, r)
		ctx := context.Background()
		p, err := outbox.NewProducer(h.DB.Std, nil)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := h.DB.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = slow.Rollback() }()
		slowID, err := p.Enqueue(ctx, slow, outbox.Message{Topic: "late.commit", Payload: []byte(`1`)})
		if err != nil {
			t.Fatal(err)
		}
		fast := enqueue(t, h, ctx, msgs(10, "early.commit", nil))
		rolled, err := h.Enqueue(ctx, msgs(5, "rolled.back", nil), true)
		if err != nil {
			t.Fatal(err)
		}
		relaytest.WaitFor(t, 10*time.Second, "later ids delivered", func() bool { return s.distinct() == len(fast) })
		if err := slow.Commit(); err != nil {
			t.Fatal(err)
		}
		relaytest.WaitFor(t, 10*time.Second, "the lower id committed late", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.count[slowID] == 1
		})
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, id := range rolled {
			if s.count[id] > 0 {
				t.Fatalf("rolled-back message %s delivered", id)
			}
		}
	})
}

func TestRelayCheckerSkipsWhatArrived(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		var mu sync.Mutex
		arrived := map[string]int{}
		var asked atomic.Int32
		pub := outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
			mu.Lock()
			defer mu.Unlock()
			arrived[env.ID]++
			if env.Attempt == 1 {
				// The destination got it, but the confirmation was lost.
				return publisher.Unknown(errors.New("timeout waiting for ack"))
			}
			return nil
		})
		checker := checkerFunc(func(_ context.Context, env *outbox.Envelope) (bool, error) {
			asked.Add(1)
			mu.Lock()
			defer mu.Unlock()
			return arrived[env.ID] > 0, nil
		})
		r := newRelay(t, h, harness.Config(outbox.Route{Pattern: "*", Publisher: pub, Checker: checker}))
		ids := enqueue(t, h, context.Background(), msgs(20, "x.y", nil))
		relaytest.Run(t, r)
		relaytest.WaitFor(t, 20*time.Second, "all sent", func() bool {
			return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'") == len(ids)
		})
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if arrived[id] != 1 {
				t.Fatalf("message %s published %d times; the checker should have stopped the resend", id, arrived[id])
			}
		}
		if asked.Load() < int32(len(ids)) {
			t.Fatalf("checker asked %d times for %d uncertain messages", asked.Load(), len(ids))
		}
	})
}

type checkerFunc func(context.Context, *outbox.Envelope) (bool, error)

func (f checkerFunc) Delivered(ctx context.Context, env *outbox.Envelope) (bool, error) {
	return f(ctx, env)
}

// outage is a destination that is down, refusing every message as
// unavailable, until down is cleared; then messages arrive in its sink.
type outage struct {
	*sink
	down  atomic.Bool
	calls atomic.Int32 // publishes tried, refused or not
}

func newOutage() *outage {
	o := &outage{sink: newSink()}
	o.down.Store(true)
	return o
}

func (o *outage) publish(ctx context.Context, env *outbox.Envelope) error {
	o.calls.Add(1)
	if o.down.Load() {
		return publisher.Unavailable(errors.New("connection refused"))
	}
	return o.sink.publish(ctx, env)
}

func TestRelayUnavailablePausesWithoutBurningAttempts(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		o := newOutage()
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(o.publish)})
		r := newRelay(t, h, cfg)
		ids := enqueue(t, h, context.Background(), msgs(30, "a.b", nil))
		relaytest.Run(t, r)
		// Every message is either tried (and refused) or held back by the
		// paused route; none of it counts as an attempt.
		relaytest.WaitFor(t, 10*time.Second, "every message refused or deferred", func() bool {
			return o.calls.Load() > 0 && h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE last_error IS NOT NULL") == 30
		})
		time.Sleep(1500 * time.Millisecond) // the route stays paused; no attempt is burnt
		if n := h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE attempts > 0 OR status <> 'pending'"); n != 0 {
			t.Fatalf("%d messages burnt attempts while the destination was down", n)
		}
		before := o.calls.Load()
		if before > 30*4 {
			t.Fatalf("%d publish calls in 1.5 s: the route was not paused", before)
		}
		o.down.Store(false)
		relaytest.WaitFor(t, 30*time.Second, "delivery after recovery", func() bool { return o.distinct() == len(ids) })
	})
}

// TestRelayReadsNothingWhileEveryRouteIsPaused: with its only destination
// down, the relay stops reading (and rewriting) the backlog between
// probes, instead of polling it; once the destination is back, everything
// is delivered within a few pauses.
func TestRelayReadsNothingWhileEveryRouteIsPaused(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		o := newOutage()
		reg := prometheus.NewRegistry()
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(o.publish)})
		cfg.Metrics = reg
		r := newRelay(t, h, cfg)
		ids := enqueue(t, h, context.Background(), msgs(30, "a.b", nil))
		relaytest.Run(t, r)
		reads := func() float64 { return metricValues(t, reg)["outbox_read_duration_seconds_count{}"] }
		relaytest.WaitFor(t, 10*time.Second, "the route paused", func() bool {
			return metricValues(t, reg)["outbox_circuit_open{route=*}"] == 1
		})
		// Polling (every 100 ms at most, per worker) would read about 80
		// times in 2 s; a paused relay reads only when a pause ends.
		before := reads()
		time.Sleep(2 * time.Second)
		if n := reads() - before; n > 16 {
			t.Fatalf("%.0f reads in 2 s while the only route was paused", n)
		}
		o.down.Store(false)
		relaytest.WaitFor(t, 30*time.Second, "delivery after recovery", func() bool { return o.distinct() == len(ids) })
	})
}

func TestRelayShutdownFinishesInFlightBatch(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		release := make(chan struct{})
		started := make(chan struct{}, 100)
		var inFlight atomic.Int32
		s := newSink()
		pub := outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
			inFlight.Add(1)
			started <- struct{}{}
			<-release
			return s.publish(ctx, env)
		})
		r := newRelay(t, h, harness.Config(outbox.Route{Pattern: "*", Publisher: pub}))
		enqueue(t, h, context.Background(), msgs(10, "a.b", nil))
		stop := relaytest.Run(t, r)
		<-started
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		time.Sleep(100 * time.Millisecond)
		close(release)
		<-stopped
		// Every publish that had started was finished and recorded; what no
		// worker had started stays pending for the next relay.
		sent := h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'")
		if sent == 0 || sent != int(inFlight.Load()) || sent != s.distinct() {
			t.Fatalf("%d recorded as sent, %d publishes started, %d arrived", sent, inFlight.Load(), s.distinct())
		}
		if n := h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND attempts = 0"); n != 10-sent {
			t.Fatalf("%d untouched pending messages, want %d", n, 10-sent)
		}
		if n := h.DB.Count(t, "SELECT count(*) FROM outbox_leases WHERE owner IS NOT NULL"); n != 0 {
			t.Fatalf("%d partitions still owned after shutdown", n)
		}
	})
}

func TestRelayShutdownTimeoutReleasesUnfinished(t *testing.T) {
	h := harness.New(t, harness.Cases[0])
	pub := outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
		<-ctx.Done() // a destination that never answers
		return ctx.Err()
	})
	cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: pub})
	cfg.ShutdownTimeout = 300 * time.Millisecond
	r := newRelay(t, h, cfg)
	enqueue(t, h, context.Background(), msgs(5, "a.b", nil))
	stop := relaytest.Run(t, r)
	time.Sleep(500 * time.Millisecond)
	stop()
	if n := h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND attempts = 0"); n != 5 {
		t.Fatalf("%d messages left untouched for the next relay, want 5", n)
	}
}

func TestRelayBatchSizeAdapts(t *testing.T) {
	h := harness.New(t, harness.Cases[0])
	var mu sync.Mutex
	var sizes []int
	s := newSink()
	cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(s.publish)})
	cfg.MinBatchSize, cfg.BatchSize, cfg.Workers = 10, 400, 1
	cfg.OnBatch = func(b outbox.BatchReport) {
		mu.Lock()
		sizes = append(sizes, b.BatchSize)
		mu.Unlock()
	}
	r := newRelay(t, h, cfg)
	enqueue(t, h, context.Background(), msgs(3000, "a.b", nil))
	relaytest.Run(t, r)
	relaytest.WaitFor(t, 30*time.Second, "backlog drained", func() bool { return s.distinct() == 3000 })
	// Then a trickle: single messages, well apart.
	for i := 0; i < 8; i++ {
		enqueue(t, h, context.Background(), msgs(1, "a.b", nil))
		relaytest.WaitFor(t, 10*time.Second, "trickle message", func() bool { return s.distinct() == 3001+i })
	}
	mu.Lock()
	defer mu.Unlock()
	if sizes[0] != 10 {
		t.Errorf("first batch size %d, want the minimum 10", sizes[0])
	}
	if slices.Max(sizes) != 400 {
		t.Errorf("batch size never grew to the maximum under a backlog: %v", sizes)
	}
	if last := sizes[len(sizes)-1]; last > 20 {
		t.Errorf("batch size %d after a trickle of single messages; it should have shrunk", last)
	}
}

// A paused route holds back only its own messages — and, per-key order
// being across topics, later messages of the same keys; other keys on
// other routes flow.
func TestPausedRouteLeavesOtherRoutesFlowing(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		r, healthy := failingRouteRelay(t, h, "billing.>", publisher.Unavailable(errors.New("broker refused the connection")), "order.>")
		ctx := context.Background()
		enqueue(t, h, ctx, msgs(20, "billing.charged", func(i int) string { return []string{"a", "b"}[i%2] }))
		orders := enqueue(t, h, ctx, msgs(20, "order.created", func(i int) string { return []string{"c", "d"}[i%2] }))
		relaytest.Run(t, r)
		relaytest.WaitFor(t, 20*time.Second, "the healthy route's messages", func() bool { return healthy.distinct() == len(orders) })
		if n := h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 'billing.charged' AND status = 'pending' AND attempts = 0"); n != 20 {
			t.Fatalf("%d of 20 messages of the paused route are pending with no attempt burnt", n)
		}
	})
}
