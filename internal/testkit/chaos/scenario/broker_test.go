package scenario_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
)

// TestChaosDestinationFaults puts a fault proxy between a relay's webhook
// publisher and the destination and, while a producer keeps committing,
// takes the destination down, blackholes it, resets its connections,
// lets requests through but drops the confirmations (half-open), and
// makes it slower than the publish timeout. While a fault lasts no row
// may become sent (nothing can be confirmed); afterwards everything
// arrives and every sent row did arrive.
func TestChaosDestinationFaults(t *testing.T) {
	scale := chaosScale(t)
	h := harness.New(t, chaosDrivers[0])
	rec := &chaos.Recorder{}
	sink := newChaosSink(t, rec)
	proxy, err := faultproxy.New(strings.TrimPrefix(sink.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	pub, err := outboxwebhook.New("http://"+proxy.Addr()+"/hook", &outboxwebhook.Config{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	const publishTimeout = 500 * time.Millisecond
	l := relayUnderLoad(t, h, rec, outbox.Route{Pattern: "*", Publisher: pub}, publishTimeout)

	hold := time.Duration(3*scale) * time.Second // 30 s under make chaos
	baseHeap, baseG := resources()
	peak := watchResources()
	names := injectDestinationFaults(t, proxy, l, hold, publishTimeout)
	maxHeap, maxG := peak()
	t.Logf("during the faults: heap in use peaked at %.1f MiB (%.1f MiB before), goroutines at %d (%d before)",
		float64(maxHeap)/(1<<20), float64(baseHeap)/(1<<20), maxG, baseG)
	// An outage must not make the relay buffer messages or pile up
	// goroutines: it holds one round per worker, whatever the fault or its
	// length — at most a batch of concurrent requests per worker, each with
	// its goroutine and its connection's two.
	goroutineBound := baseG + outbox.DefaultWorkers*loadBatch*3
	if maxHeap > baseHeap+64<<20 || maxG > goroutineBound {
		t.Errorf("resources grew during the destination faults: heap %d → %d bytes, goroutines %d → %d", baseHeap, maxHeap, baseG, maxG)
	}
	if err := l.stopProducing(); err != nil {
		t.Fatalf("producer: %v", err)
	}
	res := chaosResult{scenario: "destination faults via proxy", broker: "webhook",
		faults: fmt.Sprintf("%d × %v: %s", len(names), hold, strings.Join(names, ", ")), recovered: time.Now()}
	// Half-open and slow deliveries arrive without their confirmation and
	// are sent again: duplicates are expected, losses are not.
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: chaos.Unbounded}, 3*time.Minute)
	l.stop()
}

// steadyProducer commits two messages at a time over 30 keys until the
// returned function is called, which returns the first error. Timeouts
// count as attempts, so the messages allow 1,000: the destination faults
// must not exhaust them with the tests' fast retries.
func steadyProducer(h *harness.Harness, rec *chaos.Recorder) (stop func() error) {
	var halt atomic.Bool
	var wg sync.WaitGroup
	var failed error
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := &chaosProducer{h: h, rec: rec, maxAttempts: 1000}
		for i := 0; !halt.Load(); i++ {
			if err := p.commit(context.Background(), []string{fmt.Sprintf("k-%d", i%30), fmt.Sprintf("k-%d", (i+7)%30)}, false); err != nil {
				failed = err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return func() error {
		halt.Store(true)
		wg.Wait()
		return failed
	}
}

// loadBatch is the batch size of relayUnderLoad's relay.
const loadBatch = 100

// confirmCounter counts the messages its publisher reported confirmed,
// when the publish call returned: the moment of the confirmation, which
// the row's settle may follow much later on a loaded machine.
type confirmCounter struct {
	outbox.Publisher
	n atomic.Int64
}

func (c *confirmCounter) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	errs := c.Publisher.Publish(ctx, batch)
	for _, err := range errs {
		if err == nil {
			c.n.Add(1)
		}
	}
	return errs
}

// underLoad is a relay delivering while a producer commits.
type underLoad struct {
	stop          func()       // ends the relay
	stopProducing func() error // ends the producer, returns its error
	sent          func() int   // rows marked sent
	confirmed     func() int   // messages the publisher reported confirmed
}

// relayUnderLoad starts an in-process relay (batches of loadBatch)
// delivering through route while steadyProducer commits, and returns once
// deliveries flow.
func relayUnderLoad(t *testing.T, h *harness.Harness, rec *chaos.Recorder, route outbox.Route, publishTimeout time.Duration) underLoad {
	t.Helper()
	counter := &confirmCounter{Publisher: route.Publisher}
	route.Publisher = counter
	cfg := harness.Config(route)
	cfg.PublishTimeout = publishTimeout
	cfg.BatchSize = loadBatch
	r, err := h.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := underLoad{
		stop:          relaytest.Run(t, r),
		stopProducing: steadyProducer(h, rec),
		sent:          func() int { return relaytest.Count(t, h.DB, "sent") },
		confirmed:     func() int { return int(counter.n.Load()) },
	}
	relaytest.WaitFor(t, time.Minute, "deliveries flowing", func() bool { return l.sent() > 100 })
	return l
}

// brokerFaults runs an in-process relay over PostgreSQL that publishes
// to destination through pub, whose connection goes through proxy: while
// a producer commits, it injects the destination faults (3 s × scale
// each) and then waits until every row is settled. The caller reads what
// the broker holds into rec and judges the run with drainAndCheck(res).
func brokerFaults(t *testing.T, proxy *faultproxy.Proxy, pub outbox.Publisher, destination, broker string) (h *harness.Harness, rec *chaos.Recorder, res chaosResult) {
	t.Helper()
	h = harness.New(t, chaosDrivers[0])
	rec = &chaos.Recorder{}
	const publishTimeout = 500 * time.Millisecond
	l := relayUnderLoad(t, h, rec, outbox.Route{Pattern: "*", Publisher: pub, Destination: destination}, publishTimeout)
	hold := time.Duration(3*chaosScale(t)) * time.Second // 30 s under make chaos
	names := injectDestinationFaults(t, proxy, l, hold, publishTimeout)
	if err := l.stopProducing(); err != nil {
		t.Fatalf("producer: %v", err)
	}
	recovered := time.Now()
	// The backlog of the faults sits on 30 keys, each delivered in order
	// one message per wave: a broker with slow confirms drains it slowly.
	relaytest.WaitFor(t, 3*time.Minute+time.Duration(chaosScale(t))*30*time.Second, "every row settled", func() bool {
		return relaytest.Count(t, h.DB, "pending") == 0
	})
	drained := time.Now()
	l.stop()
	return h, rec, chaosResult{scenario: "broker faults via proxy", broker: broker,
		faults:    fmt.Sprintf("%d × %v: %s", len(names), hold, strings.Join(names, ", ")),
		recovered: recovered, drained: drained}
}

// injectDestinationFaults applies each destination fault through proxy
// for hold and checks that the publisher confirmed nothing meanwhile (a
// publish started before the fault may still be confirmed within
// publishTimeout), then restores the proxy and waits for deliveries to
// resume. It returns the faults' short names.
func injectDestinationFaults(t *testing.T, proxy *faultproxy.Proxy, l underLoad, hold, publishTimeout time.Duration) []string {
	t.Helper()
	type fault struct {
		name  string
		apply func()
	}
	faults := []fault{
		{"down (connections refused)", func() { proxy.SetMode(faultproxy.Refuse) }},
		{"blackholed (accepted, dropped)", func() { proxy.SetMode(faultproxy.Drop) }},
		{"reset (connections aborted with RST)", func() { proxy.SetMode(faultproxy.Reset) }},
		{"half-open (confirmations dropped)", func() { proxy.SetMode(faultproxy.HalfOpen) }},
		{"slower than the publish timeout", func() { proxy.SetDelay(time.Second) }},
	}
	var names []string
	for _, f := range faults {
		f.apply()
		time.Sleep(publishTimeout + 100*time.Millisecond)
		before, sentBefore := l.confirmed(), l.sent()
		time.Sleep(hold)
		after, sentAfter := l.confirmed(), l.sent()
		proxy.SetMode(faultproxy.Pass)
		proxy.SetDelay(0)
		t.Logf("%s: %d messages confirmed during %v (%d rows settled as sent meanwhile, confirmed before the fault)", f.name, after-before, hold, sentAfter-sentBefore)
		if after != before {
			t.Errorf("%s: the publisher confirmed %d messages while no confirmation could come back", f.name, after-before)
		}
		restored := time.Now()
		relaytest.WaitFor(t, 2*time.Minute, "deliveries flowing again after "+f.name, func() bool { return l.confirmed() > after+50 })
		t.Logf("%s: deliveries flowing again %.1fs after the fault ended", f.name, time.Since(restored).Seconds())
		names = append(names, strings.Fields(f.name)[0])
	}
	return names
}

// TestChaosPoisonMessages hides two poison messages among 10,000 good
// ones: one the destination rejects (400) and one it always fails (500)
// with three attempts allowed. Both go dead with their reason; the good
// ones all arrive, in key order, those behind a poison message of their
// key included.
func TestChaosPoisonMessages(t *testing.T) {
	scale := chaosScale(t)
	eachDriver(t, func(t *testing.T, dc harness.Case, h *harness.Harness, rec *chaos.Recorder) {
		sink := newChaosSink(t, rec)
		reject := func(_ string, body []byte) int {
			switch {
			case strings.Contains(string(body), `"poison":"reject"`):
				return 400
			case strings.Contains(string(body), `"poison":"fail"`):
				return 500
			}
			return 0
		}
		sink.reject.Store(&reject)
		p := &chaosProducer{h: h, rec: rec}
		n := 10000 * scale
		p.backlog(t, "k", n/2, 100)
		poison := []outbox.Message{
			{Topic: "chaos.event", Key: "k-3", Payload: []byte(`{"poison":"reject"}`)},
			{Topic: "chaos.event", Key: "k-4", Payload: []byte(`{"poison":"fail"}`), MaxAttempts: 3},
		}
		ids, err := h.Enqueue(context.Background(), poison, false)
		if err != nil {
			t.Fatal(err)
		}
		rec.Commit(ids, []string{"k-3", "k-4"})
		p.backlog(t, "k", n-n/2, 100)

		pub, err := outboxwebhook.New(sink.URL()+"/hook", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: pub})
		r, err := h.NewRelay(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		stop := relaytest.Run(t, r)
		res := chaosResult{scenario: "2 poison messages among good ones", broker: "webhook", faults: "400 once, 500 always", recovered: start}
		rep := drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDead: 2}, 3*time.Minute)
		stop()
		if rep.Dead != 2 {
			t.Fatalf("%d dead, want the 2 poison messages", rep.Dead)
		}
		for i, want := range []string{"400", "max attempts (3) reached"} {
			status, _, lastErr := messageRow(t, h, ids[i])
			t.Logf("poison %d: %s: %s", i, status, lastErr)
			if status != "dead" || !strings.Contains(lastErr, want) {
				t.Errorf("poison %d: status %s, last error %q, want dead with %q", i, status, lastErr, want)
			}
		}
	})
}

// resources is the heap in use and the number of goroutines now.
func resources() (heap uint64, goroutines int) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, runtime.NumGoroutine()
}

// watchResources samples resources every 100 ms until the returned
// function is called, which returns the peaks.
func watchResources() (peaks func() (heap uint64, goroutines int)) {
	done := make(chan struct{})
	var maxHeap uint64
	var maxG int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			h, g := resources()
			maxHeap, maxG = max(maxHeap, h), max(maxG, g)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (uint64, int) {
		close(done)
		wg.Wait()
		return maxHeap, maxG
	}
}
