package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/driver/outboxsql"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// idleRelay starts a relay that, once idle, would not poll again for a
// minute, and has no change probe: a delivery within seconds proves the
// signal under test woke it. Producers in these tests signal 300 ms after
// Enqueue, well after their commit.
func idleRelay(t *testing.T, newRelay func(*outbox.RelayConfig) (*outbox.Relay, error)) *sink {
	t.Helper()
	s := newSink()
	cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(s.publish)})
	cfg.MinPollInterval = time.Minute
	cfg.MaxPollInterval = time.Minute
	cfg.ProbeInterval = -1
	r, err := newRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Run(t, r)
	time.Sleep(300 * time.Millisecond) // past its first, empty read
	return s
}

func TestListenNotifyWakesRelayInAnotherProcess(t *testing.T) {
	for _, viaSQL := range []bool{false, true} {
		name := map[bool]string{false: "pgx", true: "database-sql"}[viaSQL]
		t.Run(name, func(t *testing.T) {
			db := testdb.New(t, store.Postgres)
			var s *sink
			if viaSQL {
				drv, err := outboxsql.New(stdlib.OpenDBFromPool(db.Pool), nil)
				if err != nil {
					t.Fatal(err)
				}
				s = idleRelay(t, func(c *outbox.RelayConfig) (*outbox.Relay, error) { return outbox.NewRelay(drv, c) })
			} else {
				s = idleRelay(t, func(c *outbox.RelayConfig) (*outbox.Relay, error) { return outbox.NewRelay(newPGX(t, db.Pool), c) })
			}
			// A producer over a pool of its own: nothing shared in memory
			// with the relay, as if it ran in another process.
			ctx := context.Background()
			pool, err := pgxpool.New(ctx, db.URL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			p, err := outbox.NewProducer(newPGX(t, pool), &outbox.Config{NotifyInterval: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Enqueue(ctx, tx, outbox.Message{Topic: "wake.up", Payload: []byte(`1`)}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			relaytest.WaitFor(t, 20*time.Second, "delivery woken by NOTIFY", func() bool { return s.distinct() == 1 })
		})
	}
}

func TestInProcessWake(t *testing.T) {
	db := testdb.New(t, store.SQLite) // polling only, plus in-process wake-ups
	wakesInProcess(t, db, db.Std, db.Std)
}

// wakesInProcess: a commit through a producer on producerDrv wakes an
// idle relay on relayDrv, over db, long before its next poll.
func wakesInProcess(t *testing.T, db *testdb.DB, relayDrv, producerDrv *outboxsql.Driver) {
	t.Helper()
	s := idleRelay(t, func(c *outbox.RelayConfig) (*outbox.Relay, error) { return outbox.NewRelay(relayDrv, c) })
	p, err := outbox.NewProducer(producerDrv, &outbox.Config{NotifyInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.SQL.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.EnqueueMany(context.Background(), tx, msgs(3, "wake.up", nil)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 20*time.Second, "delivery woken in-process", func() bool { return s.distinct() == 3 })
}

// newPGX is a pgx driver over pool.
func newPGX(t *testing.T, pool *pgxpool.Pool) *outboxpgx.Driver {
	t.Helper()
	drv, err := outboxpgx.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return drv
}

// Producers and relays built by separate New calls over one *sql.DB wake
// each other in process; on SQLite nothing else could wake the relay
// before its next poll, a minute away.
func TestInProcessWakeAcrossDrivers(t *testing.T) {
	db := testdb.New(t, store.SQLite)
	relayDrv, err := outboxsql.New(db.SQL, nil)
	if err != nil {
		t.Fatal(err)
	}
	producerDrv, err := outboxsql.New(db.SQL, nil)
	if err != nil {
		t.Fatal(err)
	}
	wakesInProcess(t, db, relayDrv, producerDrv)
}
