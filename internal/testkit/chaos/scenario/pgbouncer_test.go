package scenario_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testpgbouncer"
)

// pgbouncerMode is what producers add to their pgx URL through PgBouncer
// in transaction mode: statements described once and run unnamed, never
// prepared under a name on one server connection (docs/operations.md).
const pgbouncerMode = "&default_query_exec_mode=cache_describe"

// overPgBouncer makes a database of the test's own on the PostgreSQL
// service, migrates it directly (migrations refuse a pooler), starts
// PgBouncer in transaction mode in front of the service and returns the
// bouncer, the database name, and harnesses for both drivers (pgx and
// database/sql over pgx stdlib) whose connections go through PgBouncer.
func overPgBouncer(t *testing.T) (*testpgbouncer.Bouncer, string, *harness.Harness, *harness.Harness) {
	t.Helper()
	name := testdb.PostgresDatabase(t)
	testdb.Migrate(t, testdb.PostgresAt(t, testdb.WithDatabase(testdb.PostgresURL, name)))
	b := testpgbouncer.Start(t, "127.0.0.1:5432")
	db := testdb.PostgresAt(t, b.URL(name)+pgbouncerMode)
	hp := harness.Over(t, harness.Case{Name: "pgx via PgBouncer", Dialect: store.Postgres, PGX: true}, db)
	hs := harness.Over(t, harness.Case{Name: "sql via PgBouncer", Dialect: store.Postgres}, db)
	return b, name, hp, hs
}

// TestChaosPgBouncerKilled: producers on both drivers and a relay process
// reach PostgreSQL through PgBouncer in transaction mode (its default
// configuration otherwise: the relay opens the URL as `outbox relay`
// does, with nothing added); PgBouncer is SIGKILLed mid-drain and started
// again on the same port, 2 × scale times. Everything committed arrives,
// no row is falsely sent, the relay process recovers by itself.
func TestChaosPgBouncerKilled(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	const batch = 100
	b, name, hp, hs := overPgBouncer(t)
	rec := &chaos.Recorder{}
	sink := newChaosSink(t, rec)
	relay := startChild(t, b.URL(name), sink.URL(), "bouncer", batch, time.Second)
	wp := startKeyedWriters(t, hp, rec, rnd, 1, "pgx")
	ws := startKeyedWriters(t, hs, rec, rnd, 1, "sql")
	delivered := func() int { _, d, _ := rec.Counts(); return d }
	kills := 2 * scale
	since := 0
	var down, slowest time.Duration
	for i := range kills {
		relaytest.WaitFor(t, time.Minute, fmt.Sprintf("deliveries flowing (before kill %d)", i+1), func() bool { return delivered() > since+200 })
		time.Sleep(time.Duration(300+rnd.IntN(700)) * time.Millisecond)
		since = delivered()
		b.Kill()
		start := time.Now()
		time.Sleep(time.Duration(500+rnd.IntN(1000)) * time.Millisecond)
		b.Restart(t)
		down += time.Since(start)
		restarted := time.Now()
		relaytest.WaitFor(t, time.Minute, fmt.Sprintf("deliveries flowing after restart %d", i+1), func() bool { return delivered() > since+50 })
		slowest = max(slowest, time.Since(restarted))
	}
	relaytest.WaitFor(t, time.Minute, "deliveries flowing after the last restart", func() bool { return delivered() > since+200 })
	wp.halt()
	ws.halt()
	assertRunning(t, relay, "while PgBouncer was killed")
	res := chaosResult{scenario: "PgBouncer (transaction mode) SIGKILLed and restarted", broker: "webhook",
		faults: fmt.Sprintf("%d SIGKILL, %.1fs down in all, deliveries again within %.1fs of each restart, %d writer errors",
			kills, down.Seconds(), slowest.Seconds(), wp.failures.Load()+ws.failures.Load()), recovered: time.Now()}
	if c, _, _ := rec.Counts(); c == 0 {
		t.Fatal("no producer committed through PgBouncer")
	}
	drainAndCheck(t, hp, rec, res, chaos.Bounds{MaxDuplicates: kills * childWorkers * batch}, 2*time.Minute)
	relay.Term(t)
}

// TestPgBouncerLatency measures the time from a producer's commit to the
// publish of its message, at 50 messages a second, with the relay and
// the producer on pools of their own (as in separate processes: no
// in-process wake-up), first straight to PostgreSQL (wake-ups by
// LISTEN/NOTIFY) and then through PgBouncer in transaction mode (LISTEN
// cannot work there: the relay polls, backing off to MaxPollInterval, 1 s
// by default, when idle). It reports the figures (the latency note in
// docs/operations.md) and checks only that every message arrived.
func TestPgBouncerLatency(t *testing.T) {
	name := testdb.PostgresDatabase(t)
	directURL := testdb.WithDatabase(testdb.PostgresURL, name)
	testdb.Migrate(t, testdb.PostgresAt(t, directURL))
	if snapshotRead() {
		testdb.PostgresAt(t, directURL).EnableSnapshotRead(t)
	}
	b := testpgbouncer.Start(t, "127.0.0.1:5432")
	for _, c := range []struct{ name, relayURL, listenURL, producerURL string }{
		{"direct", directURL, "", directURL},
		{"PgBouncer (transaction mode)", b.URL(name), "", b.URL(name) + pgbouncerMode},
		{"PgBouncer, LISTEN straight to the server (--listen-db)", b.URL(name), directURL, b.URL(name) + pgbouncerMode},
	} {
		lat := commitToPublish(t, c.relayURL, c.listenURL, c.producerURL, 250)
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		t.Logf("LATENCY | %s | %d messages | p50 %.1f ms | p90 %.1f ms | p99 %.1f ms | max %.1f ms |", c.name, len(lat), q(0.5), q(0.9), q(0.99), q(1))
	}
}

// commitToPublish runs a relay over relayURL (opened as `outbox relay`
// opens --db; listening over listenURL when set, as --listen-db does)
// and commits n messages one at a time, 20 ms apart, through
// a producer of its own over producerURL; it returns each message's time
// from commit to publish.
func commitToPublish(t *testing.T, relayURL, listenURL, producerURL string, n int) []time.Duration {
	t.Helper()
	ctx := context.Background()
	db, err := dburl.Open(ctx, relayURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	committed := map[string]time.Time{}
	var lat []time.Duration
	pub := outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if c, ok := committed[env.ID]; ok {
			lat = append(lat, now.Sub(c))
			delete(committed, env.ID)
		}
		return nil
	})
	cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: pub})
	cfg.MaxPollInterval = outbox.DefaultMaxPollInterval
	cfg.SnapshotRead = snapshotRead()
	if listenURL != "" {
		ldb, err := dburl.Open(ctx, listenURL)
		if err != nil {
			t.Fatal(err)
		}
		defer ldb.Close()
		cfg.Listener = ldb.PGX
	}
	r, err := outbox.NewRelay(db.PGX, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := relaytest.Run(t, r)
	defer stop()
	h := harness.Over(t, harness.Case{Name: "pgx", Dialect: store.Postgres, PGX: true}, testdb.PostgresAt(t, producerURL))
	for i := range n {
		// The message is recorded before its commit returns, under the
		// lock the publisher takes, so that a publish racing the commit's
		// return still finds it.
		mu.Lock()
		ids, err := h.Enqueue(ctx, []outbox.Message{{Topic: "latency.probe", Payload: fmt.Appendf(nil, `{"i":%d}`, i)}}, false)
		if err == nil {
			committed[ids[0]] = time.Now()
		}
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	relaytest.WaitFor(t, time.Minute, "every message published", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(lat) == n
	})
	mu.Lock()
	defer mu.Unlock()
	return append([]time.Duration(nil), lat...)
}
