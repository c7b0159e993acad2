package scenario_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/harness"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/internal/testpgbouncer"
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
	if testing.Short() {
		t.Skip("chaos: -short")
	}
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
	select {
	case <-relay.done:
		t.Fatalf("the relay process ended (%v) while PgBouncer was killed", relay.cmd.ProcessState)
	default:
	}
	res := chaosResult{scenario: "PgBouncer (transaction mode) SIGKILLed and restarted", broker: "webhook",
		faults: fmt.Sprintf("%d SIGKILL, %.1fs down in all, deliveries again within %.1fs of each restart, %d writer errors",
			kills, down.Seconds(), slowest.Seconds(), wp.failures.Load()+ws.failures.Load()), recovered: time.Now()}
	if c, _, _ := rec.Counts(); c == 0 {
		t.Fatal("no producer committed through PgBouncer")
	}
	drainAndCheck(t, hp, rec, res, chaos.Bounds{MaxDuplicates: kills * childWorkers * batch}, 2*time.Minute)
	relay.term(t)
}
