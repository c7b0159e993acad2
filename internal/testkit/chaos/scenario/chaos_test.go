package scenario_test

// Fault-injection scenarios (docs/chaos.md). Each one records what the
// producers committed and rolled back and what reached the destination,
// drains the outbox completely, and judges the run with internal/chaos.
// OUTBOX_CHAOS_SCALE multiplies their size (default 1: seconds each);
// OUTBOX_CHAOS_SEED replays a run's random choices.

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// chaosScale is OUTBOX_CHAOS_SCALE, at least 1.
func chaosScale(t *testing.T) int {
	t.Helper()
	v := os.Getenv("OUTBOX_CHAOS_SCALE")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("OUTBOX_CHAOS_SCALE=%q: want a positive integer", v)
	}
	return n
}

// chaosRand is the scenario's source of random choices, seeded from
// OUTBOX_CHAOS_SEED or the clock; the seed is logged.
func chaosRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("OUTBOX_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("OUTBOX_CHAOS_SEED=%q: want an unsigned integer", v)
		}
		seed = s
	}
	t.Logf("seed %d (OUTBOX_CHAOS_SEED=%d replays the random choices)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// chaosSink is the destination: an HTTP endpoint that records each
// delivery it acknowledges (webhook-id, outbox-business-key) in rec.
type chaosSink struct {
	rec *chaos.Recorder
	srv *httptest.Server

	// reject, when set, answers a status instead of accepting (0: accept).
	reject atomic.Pointer[func(id string, body []byte) int]
	// gate, while set, holds the requests it covers until it opens.
	gate atomic.Pointer[sinkGate]
	// delay slows every request down.
	delay atomic.Int64
}

// sinkGate holds requests (of every id, or of ids only) until open is
// called; then it answers them 200 and records them if accept is set, or
// 503 without recording.
type sinkGate struct {
	ids    map[string]bool
	accept bool
	ch     chan struct{}
	once   sync.Once

	mu   sync.Mutex
	held []string
}

func newGate(ids map[string]bool, accept bool) *sinkGate {
	return &sinkGate{ids: ids, accept: accept, ch: make(chan struct{})}
}

func (g *sinkGate) open() { g.once.Do(func() { close(g.ch) }) }

// heldIDs are the ids of the requests held so far.
func (g *sinkGate) heldIDs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.held...)
}

func newChaosSink(t *testing.T, rec *chaos.Recorder) *chaosSink {
	s := &chaosSink{rec: rec}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		if g := s.gate.Load(); g != nil {
			g.open()
		}
		s.srv.Close()
	})
	return s
}

func (s *chaosSink) URL() string { return s.srv.URL }

func (s *chaosSink) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := req.Header.Get("webhook-id")
	if d := s.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if g := s.gate.Load(); g != nil && (g.ids == nil || g.ids[id]) {
		g.mu.Lock()
		g.held = append(g.held, id)
		g.mu.Unlock()
		<-g.ch
		if !g.accept {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	if f := s.reject.Load(); f != nil {
		if code := (*f)(id, body); code != 0 {
			w.WriteHeader(code)
			return
		}
	}
	s.rec.Deliver(id, req.Header.Get("outbox-business-key"))
	w.WriteHeader(http.StatusOK)
}

// chaosProducer commits messages through the harness's driver and
// records them: keyed by one of its own keys, each payload naming key and
// sequence.
type chaosProducer struct {
	h   *harness.Harness
	rec *chaos.Recorder
	// maxAttempts, when set, is every message's MaxAttempts.
	maxAttempts int
}

// commit enqueues one message per key in keys in one transaction, and
// commits it, or rolls it back when rollback is set. Producers are
// stopped between commits, never by cancelling ctx: a commit cut short
// by a cancelled context may still have committed, and its messages
// would then look unexpected.
func (p *chaosProducer) commit(ctx context.Context, keys []string, rollback bool) error {
	msgs := make([]outbox.Message, len(keys))
	for i, k := range keys {
		msgs[i] = outbox.Message{Topic: "chaos.event", Key: k, Payload: fmt.Appendf(nil, `{"k":%q,"i":%d}`, k, i), MaxAttempts: p.maxAttempts}
	}
	ids, err := p.h.Enqueue(ctx, msgs, rollback)
	if err != nil {
		return err
	}
	if rollback {
		p.rec.RollBack(ids)
	} else {
		p.rec.Commit(ids, keys)
	}
	return nil
}

// backlog commits n messages cycling over keys keys (named prefix-k), 250
// per transaction.
func (p *chaosProducer) backlog(t *testing.T, prefix string, n, keys int) {
	t.Helper()
	for from := 0; from < n; from += 250 {
		ks := make([]string, min(250, n-from))
		for i := range ks {
			ks[i] = fmt.Sprintf("%s-%d", prefix, (from+i)%keys)
		}
		if err := p.commit(context.Background(), ks, false); err != nil {
			t.Fatal(err)
		}
	}
}

// messageRow is the status, attempts and last error of message id.
func messageRow(t *testing.T, h *harness.Harness, id string) (status string, attempts int, lastErr string) {
	t.Helper()
	var last sql.NullString
	q := testdb.Placeholder(h.DB.Dialect, "SELECT status, attempts, last_error FROM outbox_messages WHERE message_id = ?")
	if err := h.DB.SQL.QueryRowContext(context.Background(), q, id).Scan(&status, &attempts, &last); err != nil {
		t.Fatalf("message %s: %v", id, err)
	}
	return status, attempts, last.String
}

// tableStatus is message id → status for every row of the outbox.
func tableStatus(t *testing.T, h *harness.Harness) map[string]string {
	t.Helper()
	return h.DB.Statuses(t)
}

// chaosResult is one line of the results table in docs/chaos.md.
type chaosResult struct {
	scenario, broker, faults string
	recovered                time.Time // when the last fault ended
	// drained is when the table was found drained, for scenarios that
	// wait for that before reading the destination (zero: drainAndCheck
	// finds out).
	drained time.Time
}

// drainAndCheck waits (up to d) until no row is pending and every
// committed message arrived or is dead (but for b.MaxLost, which a
// database that loses commits of its own may leave missing), then judges the run against b and
// logs the result line.
func drainAndCheck(t *testing.T, h *harness.Harness, rec *chaos.Recorder, res chaosResult, b chaos.Bounds, d time.Duration) chaos.Report {
	t.Helper()
	deadline := time.Now().Add(d)
	drained := false
	for time.Now().Before(deadline) {
		committed, distinct, _ := rec.Counts()
		if distinct >= committed-b.MaxDead-b.MaxLost && h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE "+h.DB.Status()+" = 'pending'") == 0 {
			drained = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	end := time.Now()
	if !res.drained.IsZero() {
		end = res.drained
	}
	recovery := end.Sub(res.recovered)
	rep := chaos.Check(rec.History(tableStatus(t, h)))
	t.Logf("CHAOS-RESULT | %s | %s | %s | %d | %s | %d | %d | %d | %d | %.1fs |",
		res.scenario, h.Name, res.broker, rep.Committed, res.faults, rep.Lost, rep.Duplicates, rep.FalselySent, rep.Inversions, recovery.Seconds())
	t.Logf("report: %s", rep)
	if !drained {
		t.Errorf("not drained within %v", d)
	}
	if err := rep.Err(b); err != nil {
		t.Error(err)
	}
	return rep
}

// chaosDrivers are the databases the process-level scenarios run on.
var chaosDrivers = []harness.Case{{Name: "pgx", Dialect: store.Postgres, PGX: true}, {Name: "mysql", Dialect: store.MySQL}}

// childWorkers is the relay processes' worker count (the default): a
// kill can cut that many batches short at once.
const childWorkers = outbox.DefaultWorkers

// TestChaosRandomKillsWithProducers: two relay processes drain a backlog
// while two producers commit, a tenth of their transactions rolled back,
// and relays are SIGKILLed and replaced at random moments. Nothing
// committed is lost, nothing rolled back arrives, no row is falsely sent.
func TestChaosRandomKillsWithProducers(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	const batch = 100
	eachDriver(t, func(t *testing.T, dc harness.Case, h *harness.Harness, rec *chaos.Recorder) {
		// A backlog to drain while the kills come: 20,000 per scale
		// step (200,000 under make chaos), besides what the producers
		// commit meanwhile.
		backlog := 20000 * scale
		(&chaosProducer{h: h, rec: rec}).backlog(t, "pre", backlog, 100)
		sink := newChaosSink(t, rec)
		ctx := context.Background()
		var rolledBack atomic.Int64
		p := &chaosProducer{h: h, rec: rec}
		producers := startLoops(rnd, 2, func(w int, pr *rand.Rand) error {
			keys := make([]string, 1+pr.IntN(10))
			for i := range keys {
				keys[i] = fmt.Sprintf("w%d-%d", w, pr.IntN(20))
			}
			rb := pr.IntN(10) == 0
			if err := p.commit(ctx, keys, rb); err != nil {
				return err
			}
			if rb {
				rolledBack.Add(1)
			}
			// About 250 messages a second per producer: the relays keep
			// draining the backlog on every database while they commit.
			time.Sleep(time.Duration(len(keys))*4*time.Millisecond + time.Duration(pr.IntN(5))*time.Millisecond)
			return nil
		})
		defer producers.stop.Store(true)
		relays := []*child{
			startChild(t, h.DB.URL, sink.URL(), "rk-a0", batch, time.Second),
			startChild(t, h.DB.URL, sink.URL(), "rk-b0", batch, time.Second),
		}
		// The kills land at random points of the backlog's drain: each
		// waits until the destination holds a random number of
		// distinct messages, the points spread over the backlog.
		kills := 5 * scale
		points := make([]int, kills)
		for k := range points {
			points[k] = 1 + rnd.IntN(backlog-1)
		}
		slices.Sort(points)
		for k := range kills {
			relaytest.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d messages delivered before kill %d", points[k], k+1),
				func() bool { _, d, _ := rec.Counts(); return d >= points[k] })
			i := rnd.IntN(len(relays))
			relays[i].Kill()
			relays[i] = startChild(t, h.DB.URL, sink.URL(), fmt.Sprintf("rk-%c%d", 'a'+i, k+1), batch, time.Second)
		}
		if err := producers.halt(); err != nil {
			t.Fatalf("producer: %v", err)
		}
		if pending := h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE "+h.DB.Status()+" = 'pending'"); pending == 0 {
			t.Log("the backlog was drained by the last kill")
		} else {
			t.Logf("%d messages still pending at the last kill", pending)
		}
		res := chaosResult{scenario: "random SIGKILL, producers, 10% rollback", broker: "webhook",
			faults: fmt.Sprintf("%d SIGKILL, %d rollbacks", kills, rolledBack.Load()), recovered: time.Now()}
		if rolledBack.Load() == 0 {
			t.Fatal("no transaction was rolled back: the scenario proved nothing about rollbacks")
		}
		drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: killCost(h) * kills * childWorkers * batch}, 3*time.Minute+time.Duration(scale)*30*time.Second)
		for _, c := range relays {
			c.Term(t)
		}
	})
}

// eachDriver runs fn as a subtest for each of chaosDrivers, with a fresh
// harness on that database and an empty recorder.
func eachDriver(t *testing.T, fn func(t *testing.T, dc harness.Case, h *harness.Harness, rec *chaos.Recorder)) {
	t.Helper()
	eachDriverOf(t, chaosDrivers, fn)
}

// eachDriverOf is eachDriver over drivers.
func eachDriverOf(t *testing.T, drivers []harness.Case, fn func(t *testing.T, dc harness.Case, h *harness.Harness, rec *chaos.Recorder)) {
	t.Helper()
	for _, dc := range drivers {
		if snapshotRead() && dc.Dialect != store.Postgres {
			continue // the same scenario as on the table read
		}
		t.Run(dc.Name, func(t *testing.T) {
			fn(t, dc, harness.New(t, dc), &chaos.Recorder{})
		})
	}
}

// killCost is how many rounds of each worker a relay killed mid-drain
// may have delivered without recording them: the round in flight, and,
// read by snapshots, the round before it, whose cursor the next read
// records (docs/snapshot-read.md).
func killCost(h *harness.Harness) int {
	if h.DB.Snapshot {
		return 2
	}
	return 1
}

// snapshotRead says the scenarios run with the snapshot read on
// PostgreSQL (OUTBOX_TEST_READ_PATH=snapshot, see harness.Over).
func snapshotRead() bool { return os.Getenv("OUTBOX_TEST_READ_PATH") == "snapshot" }

// loops are goroutines that each call a step again and again, with a
// random source of their own, until halted or the step fails: the
// producers and writers of the scenarios.
type loops struct {
	stop atomic.Bool
	wg   sync.WaitGroup
	errs chan error
}

// startLoops starts n loops of step; step gets the loop's number and its
// random source, seeded from rnd (so OUTBOX_CHAOS_SEED replays them). A
// loop ends at the first error its step returns.
func startLoops(rnd *rand.Rand, n int, step func(w int, pr *rand.Rand) error) *loops {
	l := &loops{errs: make(chan error, n)}
	for w := range n {
		seed := rnd.Uint64()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			pr := rand.New(rand.NewPCG(seed, seed))
			for !l.stop.Load() {
				if err := step(w, pr); err != nil {
					l.errs <- err
					return
				}
			}
		}()
	}
	return l
}

// halt stops the loops, waits for them to end, and returns the first
// error a step failed with, nil if none did.
func (l *loops) halt() error {
	l.stop.Store(true)
	l.wg.Wait()
	select {
	case err := <-l.errs:
		return err
	default:
		return nil
	}
}
