package brokertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// RunConsume runs the consume suite; newTarget is called once per
// subtest, which runs in parallel with the others.
func RunConsume(t *testing.T, newTarget func(t *testing.T) *Target) {
	t.Helper()
	runParallel(t, newTarget, []suiteCase{
		{"Decodes", decodes},
		{"RedeliversAfterHandlerError", redelivers},
		{"EndToEnd", consumeEndToEnd},
	})
}

// publishOne publishes env through tg's publisher, failing on an error.
func publishOne(t *testing.T, tg *Target, env *outbox.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := tg.Publisher.Publish(ctx, []*outbox.Envelope{env})
	if len(errs) != 1 || errs[0] != nil {
		t.Fatalf("publish %s: %v", env.ID, errs)
	}
}

// settle waits until tg says everything at dest is acknowledged or,
// without Settled, gives a stray delivery 300 ms to show.
func settle(t *testing.T, tg *Target, dest string) {
	t.Helper()
	if tg.Settled == nil {
		time.Sleep(300 * time.Millisecond)
		return
	}
	relaytest.WaitFor(t, 10*time.Second, "every message at "+dest+" acknowledged", func() bool { return tg.Settled(t, dest) })
}

// decodes: a message the Publisher sent reaches the handler with its id,
// topic, key, content type, headers, payload and the producer's trace; a
// foreign message at the same destination never does.
func decodes(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	got := make(chan *inbox.Message, 2)
	traces := make(chan string, 2)
	tg.Consume(t, dest, func(ctx context.Context, m *inbox.Message) error {
		traces <- trace.SpanContextFromContext(ctx).TraceID().String()
		got <- m
		return nil
	})
	if tg.PublishForeign != nil {
		tg.PublishForeign(t, dest)
	}
	env := publishertest.Envelope(dest, "order-42", []byte(`{"order_id":42}`), "application/json",
		map[string]string{"x-tenant": "acme", publisher.HeaderTraceParent: traceParent})
	publishOne(t, tg, env)

	m := wait(t, got, 30*time.Second, "message at the handler")
	if m.ID != env.ID || m.Topic != env.Headers[publisher.HeaderTopic] || m.Key != "order-42" || m.ContentType != "application/json" ||
		string(m.Payload) != `{"order_id":42}` {
		t.Errorf("decoded %+v, want the envelope %+v", m, env)
	}
	for k, v := range env.Headers {
		if m.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, m.Headers[k], v)
		}
	}
	if tr := <-traces; tr != traceID {
		t.Errorf("handler's trace id %q, want the producer's", tr)
	}
	settle(t, tg, dest)
	select {
	case m := <-got:
		t.Errorf("a second message reached the handler: %+v", m)
	default:
	}
}

// redelivers: a handler that fails after writing its effect (rolled back
// with the inbox record) gets the message again, and the effect is
// applied exactly once.
func redelivers(t *testing.T, tg *Target) {
	failures := int32(2)
	if tg.Broker.RedeliversOnReconnect {
		failures = 1
	}
	db := testdb.New(t, store.Postgres)
	ib := relaytest.Effects(t, db, "consume-test")
	dest := tg.NewDestination(t)
	var calls atomic.Int32
	tg.Consume(t, dest, func(ctx context.Context, m *inbox.Message) error {
		_, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error {
			if err := relaytest.InsertEffect(ctx, tx, m); err != nil {
				return err
			}
			if calls.Add(1) <= failures {
				return errors.New("injected failure after the effect")
			}
			return nil
		})
		return err
	})
	env := publishertest.Envelope(dest, "k", []byte(`{}`), "application/json", nil)
	publishOne(t, tg, env)

	relaytest.WaitFor(t, 30*time.Second, fmt.Sprintf("call %d", failures+1), func() bool { return calls.Load() > failures })
	relaytest.WaitFor(t, 10*time.Second, "one effect", func() bool {
		return db.Count(t, `SELECT count(*) FROM effects WHERE message_id = $1`, env.ID) == 1
	})
	settle(t, tg, dest)
	if n := db.Count(t, `SELECT count(*) FROM effects`); n != 1 || calls.Load() != failures+1 {
		t.Errorf("%d effects after %d calls, want 1 after %d", n, calls.Load(), failures+1)
	}
}

// consumeEndToEnd: rows inserted with plain SQL (with a trace) go through
// a real relay that publishes each of them twice (the broker may keep one
// copy, if it dedupes by id) to Consume with an inbox, whose handler loses the ack
// of each message's first delivery. Every copy and every redelivery
// reaches the handler with its topic and trace, every message has exactly
// one effect, and each key's messages are applied in order.
func consumeEndToEnd(t *testing.T, tg *Target) {
	const total, keys = 40, 5
	db := testdb.New(t, store.Postgres)
	ib := relaytest.Effects(t, db, "consume-test")
	topic := tg.NewDestination(t)

	var mu sync.Mutex
	var order relaytest.KeyOrder
	var deliveries, applied atomic.Int32
	handler, twice := relaytest.LostAcks(func(ctx context.Context, m *inbox.Message) error {
		deliveries.Add(1)
		if tr := trace.SpanContextFromContext(ctx).TraceID().String(); m.Topic != topic || tr != traceID {
			t.Errorf("message %s: topic %q, trace %s; want %q and the producer's", m.ID, m.Topic, tr, topic)
		}
		ok, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error { return relaytest.InsertEffect(ctx, tx, m) })
		if ok && err == nil {
			applied.Add(1)
			if tg.Broker.KeepsOrder {
				mu.Lock()
				order.Check(t, m.ID, m.Payload)
				mu.Unlock()
			}
		}
		return err
	})
	tg.Consume(t, topic, handler)

	for i := range total {
		db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES ($1, $2, $3, $4)`,
			topic, fmt.Sprintf("key-%d", i%keys), fmt.Sprintf(`{"k":%d,"seq":%d}`, i%keys, i), `{"traceparent":"`+traceParent+`"}`)
	}
	copies := 2 // at the consumer, and stored
	if tg.Broker.DedupesByID {
		copies = 1
	}
	relaytest.Start(t, db, relayConfig(relaytest.Twice{Publisher: tg.Publisher}))

	// Each copy at least once, and the first delivery of each message
	// again after its lost ack.
	relaytest.WaitFor(t, 60*time.Second, "every copy and every redelivery at the handler", func() bool {
		return int(deliveries.Load()) >= (copies+1)*total && twice() == total
	})
	relaytest.WaitFor(t, 30*time.Second, "every message marked sent", func() bool { return relaytest.Count(t, db, "sent") == total })
	relaytest.CheckEffects(t, db, total)
	if n := applied.Load(); n != total {
		t.Errorf("%d messages applied, want %d", n, total)
	}
	if n := db.Count(t, `SELECT count(DISTINCT e.message_id) FROM effects e JOIN outbox_messages m ON m.message_id::text = e.message_id`); n != total {
		t.Errorf("%d effects match outbox messages, want %d", n, total)
	}
	if tg.Stored != nil {
		if n := tg.Stored(t, topic); n != copies*total {
			t.Errorf("%s holds %d messages, want %d (%d per message)", topic, n, copies*total, copies)
		}
	}
}
