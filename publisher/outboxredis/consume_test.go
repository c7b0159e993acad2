package outboxredis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxredis"
)

const (
	testTrace   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// fast are ConsumeOptions quick enough for tests.
var fast = &outboxredis.ConsumeOptions{Block: 100 * time.Millisecond, RetryDelay: 50 * time.Millisecond}

// consume runs Consume in the background until the test ends, then
// checks it returned nil.
func consume(t *testing.T, c redis.UniversalClient, stream, name string, opts *outboxredis.ConsumeOptions, h func(context.Context, *inbox.Message) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- outboxredis.Consume(ctx, c, stream, "consumers", name, h, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Consume: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Consume did not return within 10s of ctx ending")
		}
	})
}

// effectsDB is a test database with an effect table and an inbox over it.
func effectsDB(t *testing.T) (*testdb.DB, *inbox.Inbox[pgx.Tx]) {
	t.Helper()
	db := testdb.New(t, store.Postgres)
	db.Exec(t, `CREATE TABLE effects (message_id text NOT NULL)`)
	ib, err := inbox.New(db.PGX, &inbox.Config{Consumer: "inventory"})
	if err != nil {
		t.Fatal(err)
	}
	return db, ib
}

// applyOnce is a handler that inserts one effect row through ib.
func applyOnce(ib *inbox.Inbox[pgx.Tx]) func(context.Context, *inbox.Message) error {
	return func(ctx context.Context, m *inbox.Message) error {
		_, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, m.ID)
			return err
		})
		return err
	}
}

func TestConsumeDecodes(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	stream := streamName(t, admin, "consume")
	createStream(t, admin, stream)
	e := env(stream, "order-42", `{"order_id":42}`)
	e.Headers["traceparent"] = testTrace
	e.Headers["x-tenant"] = "acme"
	if errs := publish(newPublisher(t, admin, nil), e); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := make(chan *inbox.Message, 1)
	traces := make(chan string, 1)
	consume(t, admin, stream, "c1", fast, func(ctx context.Context, m *inbox.Message) error {
		traces <- trace.SpanContextFromContext(ctx).TraceID().String()
		got <- m
		return nil
	})
	select {
	case m := <-got:
		if m.ID != e.ID || m.Topic != e.Topic || m.Key != "order-42" || m.ContentType != "application/json" || string(m.Payload) != `{"order_id":42}` {
			t.Errorf("decoded %+v, want the envelope %+v", m, e)
		}
		for k, v := range e.Headers {
			if m.Headers[k] != v {
				t.Errorf("header %s = %q, want %q", k, m.Headers[k], v)
			}
		}
		if tr := <-traces; tr != testTraceID {
			t.Errorf("handler's trace id %s, want the producer's", tr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no entry consumed within 10s")
	}
	relaytest.WaitFor(t, 5*time.Second, "the entry acked", func() bool {
		p, err := admin.XPending(context.Background(), stream, "consumers").Result()
		return err == nil && p.Count == 0
	})
}

func TestDecodeRejectsForeignEntries(t *testing.T) {
	t.Parallel()
	for _, x := range []redis.XMessage{
		{ID: "1-0", Values: map[string]any{"payload": "x"}},
		{ID: "2-0", Values: map[string]any{"message_id": "a", "headers": "[1]"}},
		{ID: "3-0"}, // deleted while pending
	} {
		if _, err := outboxredis.Decode("s", x); !errors.Is(err, outboxredis.ErrNotOutboxEntry) {
			t.Errorf("Decode(%v): %v, want ErrNotOutboxEntry", x, err)
		}
	}
}

func TestConsumeMissingGroup(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	stream := streamName(t, admin, "nogroup")
	err := outboxredis.Consume(context.Background(), admin, stream, "consumers", "c1", func(context.Context, *inbox.Message) error { return nil }, fast)
	if !errors.Is(err, outboxredis.ErrNoGroup) {
		t.Fatalf("Consume without a group: %v, want ErrNoGroup", err)
	}
	// CreateGroup makes it, reading from the start.
	if errs := publish(newPublisher(t, admin, &outboxredis.Config{CreateStreams: true}), env(stream, "k", `{}`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := make(chan string, 1)
	consume(t, admin, stream, "c1", &outboxredis.ConsumeOptions{Block: 100 * time.Millisecond, CreateGroup: true}, func(_ context.Context, m *inbox.Message) error {
		got <- m.ID
		return nil
	})
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("CreateGroup: nothing consumed within 10s")
	}
}

// TestConsumeRedeliversAfterHandlerError: a handler that fails the first
// time leaves the entry pending and nothing applied; the retry applies
// the effect once.
func TestConsumeRedeliversAfterHandlerError(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	stream := streamName(t, admin, "retry")
	createStream(t, admin, stream)
	db, ib := effectsDB(t)
	if errs := publish(newPublisher(t, admin, nil), env(stream, "k", `{}`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	var mu sync.Mutex
	calls := 0
	consume(t, admin, stream, "c1", fast, func(ctx context.Context, m *inbox.Message) error {
		_, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, m.ID); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 1 {
				return errors.New("simulated failure after the effect")
			}
			return nil
		})
		return err
	})
	relaytest.WaitFor(t, 15*time.Second, "the effect applied and acked", func() bool {
		p, err := admin.XPending(context.Background(), stream, "consumers").Result()
		return db.Count(t, `SELECT count(*) FROM effects`) == 1 && err == nil && p.Count == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Errorf("effect ran %d times, want 2 (one failed, one applied)", calls)
	}
}

// TestConsumeReclaimsPending: entries read but not acked by a crashed run
// of this consumer are processed when it starts again, and with ClaimIdle
// those of a consumer that never came back are taken over.
func TestConsumeReclaimsPending(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	stream := streamName(t, admin, "reclaim")
	createStream(t, admin, stream)
	db, ib := effectsDB(t)
	if errs := publish(newPublisher(t, admin, nil), env(stream, "a", `{}`), env(stream, "b", `{}`)); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	// "c1" and "dead" each read one entry and crash before acking.
	for _, name := range []string{"c1", "dead"} {
		if err := admin.XReadGroup(context.Background(), &redis.XReadGroupArgs{Group: "consumers", Consumer: name, Streams: []string{stream, ">"}, Count: 1, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	consume(t, admin, stream, "c1", &outboxredis.ConsumeOptions{Block: 100 * time.Millisecond, ClaimIdle: 200 * time.Millisecond}, applyOnce(ib))
	relaytest.WaitFor(t, 15*time.Second, "both entries applied and acked", func() bool {
		p, err := admin.XPending(context.Background(), stream, "consumers").Result()
		return db.Count(t, `SELECT count(*) FROM effects`) == 2 && err == nil && p.Count == 0
	})
}

// TestConsumeEndToEnd: plain SQL inserts → relay → XADD of every message
// twice → two consumers of the group through a real inbox: each message
// is applied exactly once.
func TestConsumeEndToEnd(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	topic := streamName(t, admin, "e2e")
	createStream(t, admin, topic)
	db, ib := effectsDB(t)
	const n = 20
	for i := range n {
		db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES ($1, $2, $3, $4)`,
			topic, fmt.Sprintf("key-%d", i%3), fmt.Sprintf(`{"seq":%d}`, i), `{"traceparent":"`+testTrace+`"}`)
	}
	relaytest.Start(t, db, relaytest.Config(relaytest.Twice{Publisher: newPublisher(t, admin, nil)}))
	var mu sync.Mutex
	deliveries := 0
	h := applyOnce(ib)
	for _, name := range []string{"c1", "c2"} {
		consume(t, admin, topic, name, fast, func(ctx context.Context, m *inbox.Message) error {
			if m.Topic != topic || trace.SpanContextFromContext(ctx).TraceID().String() != testTraceID {
				t.Errorf("message %s: topic %q, trace %v", m.ID, m.Topic, trace.SpanContextFromContext(ctx).TraceID())
			}
			mu.Lock()
			deliveries++
			mu.Unlock()
			return h(ctx, m)
		})
	}
	relaytest.WaitFor(t, 30*time.Second, "every entry delivered and acked", func() bool {
		mu.Lock()
		d := deliveries
		mu.Unlock()
		p, err := admin.XPending(context.Background(), topic, "consumers").Result()
		return d >= 2*n && err == nil && p.Count == 0
	})
	if got := admin.XLen(context.Background(), topic).Val(); got != 2*n {
		t.Errorf("stream holds %d entries, want %d (each message twice)", got, 2*n)
	}
	if got := db.Count(t, `SELECT count(*) FROM effects`); got != n {
		t.Errorf("%d effects, want %d", got, n)
	}
	for _, id := range relaytest.SentIDs(t, db) {
		if db.Count(t, `SELECT count(*) FROM effects WHERE message_id = $1`, id) != 1 {
			t.Errorf("message %s: not applied exactly once", id)
		}
	}
}
