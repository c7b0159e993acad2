package outboxpgx_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// sharedSchema is one schema's driver over a SharedListener and what its
// Listen saw.
type sharedSchema struct {
	db     *testdb.DB
	drv    *outboxpgx.Driver
	wakes  atomic.Int64
	woke   chan struct{}
	cancel context.CancelFunc
	done   chan error
}

func (s *sharedSchema) listen(t *testing.T, channel string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() {
		s.done <- s.drv.Listen(ctx, channel, func() {
			s.wakes.Add(1)
			select {
			case s.woke <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(cancel)
}

// waitWake waits for a wake-up after the ones already taken.
func (s *sharedSchema) waitWake(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.woke:
	case err := <-s.done:
		t.Fatalf("%s: Listen returned %v", what, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no wake-up within 10s", what)
	}
}

func (s *sharedSchema) drain() {
	for {
		select {
		case <-s.woke:
		default:
			return
		}
	}
}

// listenBackends are the server processes of application app waiting
// after a LISTEN.
func listenBackends(t *testing.T, admin *testdb.DB, app string) []string {
	return admin.Strings(t, "SELECT pid::text FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'", app)
}

func TestSharedListenerOneConnectionForManySchemas(t *testing.T) {
	app := testdb.RandomName("shared_")
	channel := testdb.RandomName("outbox_shared_")
	shared := &outboxpgx.SharedListener{}
	var schemas []*sharedSchema
	for range 3 {
		own := testdb.New(t, store.Postgres)
		db := testdb.PostgresAt(t, own.URL+"&application_name="+app)
		drv, err := outboxpgx.New(db.Pool, &outboxpgx.Config{Listener: shared})
		if err != nil {
			t.Fatal(err)
		}
		s := &sharedSchema{db: db, drv: drv, woke: make(chan struct{}, 1)}
		s.listen(t, channel)
		schemas = append(schemas, s)
	}
	for i, s := range schemas {
		s.waitWake(t, "schema "+string(rune('A'+i))+" listening")
	}
	admin := schemas[0].db
	pids := listenBackends(t, admin, app)
	if len(pids) != 1 || shared.Listening() != 1 {
		t.Fatalf("three schemas listen over %d server connections (%v), the listener holds %d; want 1", len(pids), pids, shared.Listening())
	}

	// A signal naming schema A wakes A alone: B's wake count does not move
	// before C's later signal reaches C over the same connection.
	for _, s := range schemas {
		s.drain()
	}
	a, b, c := schemas[0], schemas[1], schemas[2]
	bBefore := b.wakes.Load()
	if err := a.drv.Notify(context.Background(), channel); err != nil {
		t.Fatal(err)
	}
	a.waitWake(t, "A after its producer's signal")
	if err := c.drv.Notify(context.Background(), channel); err != nil {
		t.Fatal(err)
	}
	c.waitWake(t, "C after its producer's signal")
	if got := b.wakes.Load(); got != bBefore {
		t.Fatalf("B woke %d times for signals naming A and C", got-bBefore)
	}

	// A signal naming no schema (plain SQL's pg_notify) wakes every one.
	admin.Exec(t, "SELECT pg_notify($1, '')", channel)
	for i, s := range schemas {
		s.waitWake(t, "schema "+string(rune('A'+i))+" after a signal without a schema")
	}

	// The connection ends: every Listen returns its error, and listening
	// again opens one new connection for all.
	admin.Exec(t, "SELECT pg_terminate_backend($1::int)", pids[0])
	for i, s := range schemas {
		select {
		case err := <-s.done:
			if err == nil || errors.Is(err, context.Canceled) {
				t.Fatalf("schema %c: Listen returned %v after its connection was terminated", 'A'+i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("schema %c: Listen still blocked 10s after its connection was terminated", 'A'+i)
		}
	}
	for _, s := range schemas {
		s.drain()
		s.listen(t, channel)
	}
	for i, s := range schemas {
		s.waitWake(t, "schema "+string(rune('A'+i))+" listening again")
	}
	// The terminated backend may still be listed for a moment after its
	// client saw the connection end: wait for it to leave before counting.
	again := listenBackends(t, admin, app)
	for deadline := time.Now().Add(10 * time.Second); slices.Contains(again, pids[0]) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		again = listenBackends(t, admin, app)
	}
	if len(again) != 1 || again[0] == pids[0] {
		t.Fatalf("after the reconnect: LISTEN backends %v (the terminated one was %s); want one new", again, pids[0])
	}

	// One subscriber leaving keeps the connection for the others; the
	// last one closes it.
	a.cancel()
	if err := <-a.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("A's Listen returned %v when cancelled", err)
	}
	b.drain()
	if err := b.drv.Notify(context.Background(), channel); err != nil {
		t.Fatal(err)
	}
	b.waitWake(t, "B after A left")
	b.cancel()
	c.cancel()
	<-b.done
	<-c.done
	if n := shared.Listening(); n != 0 {
		t.Fatalf("the listener holds %d connections after every driver stopped listening", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(listenBackends(t, admin, app)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("LISTEN backends %v still there 10s after the last driver stopped", listenBackends(t, admin, app))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSharedListenerRefusesAnotherDatabase(t *testing.T) {
	channel := testdb.RandomName("outbox_shared_")
	shared := &outboxpgx.SharedListener{}
	first := testdb.New(t, store.Postgres)
	d1, err := outboxpgx.New(first.Pool, &outboxpgx.Config{Listener: shared})
	if err != nil {
		t.Fatal(err)
	}
	s1 := &sharedSchema{db: first, drv: d1, woke: make(chan struct{}, 1)}
	s1.listen(t, channel)
	s1.waitWake(t, "first database listening")

	other := testdb.PostgresAt(t, testdb.WithDatabase(testdb.PostgresURL, testdb.PostgresDatabase(t)))
	d2, err := outboxpgx.New(other.Pool, &outboxpgx.Config{Listener: shared})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = d2.Listen(ctx, channel, func() {})
	if err == nil || !strings.Contains(err.Error(), "one database") {
		t.Fatalf("Listen for another database over the same shared listener: %v; want a refusal naming both databases", err)
	}
}
