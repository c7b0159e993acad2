package outboxkafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// groupClient is a consumer-group client as Consume expects it: manual
// commits, reading from the start.
func groupClient(t *testing.T, c *kfake.Cluster, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumerGroup(randomTopic("group")),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// runConsume runs Consume until the test ends and checks it returned nil.
func runConsume(t *testing.T, cl *kgo.Client, handler func(context.Context, *inbox.Message) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- outboxkafka.Consume(ctx, cl, handler, &outboxkafka.ConsumeOptions{Logger: relaytest.Logger(), RetryBackoff: 10 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
}

// TestConsumeDecodes: a message published by the Publisher reaches the
// handler with its id, topic, key, headers, payload and trace, and a
// record that is not an outbox message is skipped.
func TestConsumeDecodes(t *testing.T) {
	t.Parallel()
	const topic = "consume.decode"
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	raw := &kgo.Record{Topic: topic, Value: []byte("not from the outbox")}
	if err := dial(t, c).Client().ProduceSync(t.Context(), raw).FirstErr(); err != nil {
		t.Fatal(err)
	}
	env := publishertest.Envelope(topic, "order-42", []byte(`{"order_id":42}`), "application/json",
		map[string]string{"x-tenant": "acme", outbox.HeaderTraceParent: traceParent})
	if errs := publish(t, dial(t, c), 10*time.Second, env); errs[0] != nil {
		t.Fatal(errs[0])
	}

	got := make(chan *inbox.Message, 2)
	traces := make(chan string, 2)
	runConsume(t, groupClient(t, c, topic), func(ctx context.Context, m *inbox.Message) error {
		traces <- trace.SpanContextFromContext(ctx).TraceID().String()
		got <- m
		return nil
	})
	var m *inbox.Message
	select {
	case m = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no message within 30s")
	}
	if m.ID != env.ID || m.Topic != "conformance.test" || m.Key != "order-42" || m.ContentType != "application/json" ||
		string(m.Payload) != `{"order_id":42}` {
		t.Errorf("decoded %+v", m)
	}
	for k, v := range env.Headers {
		if m.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, m.Headers[k], v)
		}
	}
	if tr := <-traces; tr != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("handler's trace id %q, want the producer's", tr)
	}
	if _, err := outboxkafka.Decode(raw); !errors.Is(err, outboxkafka.ErrNoMessageID) {
		t.Errorf("Decode of a foreign record: %v, want ErrNoMessageID", err)
	}
	select {
	case m := <-got:
		t.Errorf("unexpected second message %+v", m)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestConsumeRetriesFailedHandler: a handler that fails (after writing its
// effect, rolled back with the inbox record) gets the message again, and
// the effect is applied exactly once.
func TestConsumeRetriesFailedHandler(t *testing.T) {
	t.Parallel()
	const topic = "consume.retry"
	db := postgres(t)
	ib := relaytest.Effects(t, db, "consume-test")
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	env := publishertest.Envelope(topic, "k", []byte(`{}`), "application/json", nil)
	if errs := publish(t, dial(t, c), 10*time.Second, env); errs[0] != nil {
		t.Fatal(errs[0])
	}
	var calls atomic.Int32
	runConsume(t, groupClient(t, c, topic), func(ctx context.Context, m *inbox.Message) error {
		_, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error {
			if err := relaytest.InsertEffect(ctx, tx, m); err != nil {
				return err
			}
			if calls.Add(1) <= 2 {
				return errors.New("injected failure")
			}
			return nil
		})
		return err
	})
	relaytest.WaitFor(t, 30*time.Second, "the third call", func() bool { return calls.Load() >= 3 })
	relaytest.WaitFor(t, 10*time.Second, "one effect", func() bool {
		return db.Count(t, `SELECT count(*) FROM effects WHERE message_id = $1`, env.ID) == 1
	})
	time.Sleep(200 * time.Millisecond)
	if n := db.Count(t, `SELECT count(*) FROM effects`); n != 1 || calls.Load() != 3 {
		t.Errorf("%d effects after %d calls, want 1 after 3", n, calls.Load())
	}
}

// TestConsumeEndToEnd: rows inserted with plain SQL go through a real
// relay, each published twice, to Consume with an inbox: every message
// has exactly one effect, and each key's messages are applied in order.
func TestConsumeEndToEnd(t *testing.T) {
	t.Parallel()
	const topic, total = "consume.e2e", 40
	db := postgres(t)
	ib := relaytest.Effects(t, db, "consume-test")
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	relaytest.Start(t, db, relayConfig(relaytest.Twice{Publisher: dial(t, c)}))
	for i := range total {
		db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, $2, $3)`,
			topic, fmt.Sprintf("key-%d", i%5), fmt.Sprintf(`{"k":%d,"seq":%d}`, i%5, i))
	}

	var mu sync.Mutex
	var order relaytest.KeyOrder
	var deliveries, applied atomic.Int32
	runConsume(t, groupClient(t, c, topic), func(ctx context.Context, m *inbox.Message) error {
		deliveries.Add(1)
		ok, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error { return relaytest.InsertEffect(ctx, tx, m) })
		if ok {
			applied.Add(1)
			mu.Lock()
			order.Check(t, m.ID, m.Payload)
			mu.Unlock()
		}
		return err
	})
	relaytest.WaitFor(t, 60*time.Second, "every copy delivered", func() bool { return deliveries.Load() >= 2*total })
	relaytest.WaitFor(t, 30*time.Second, "every message marked sent", func() bool { return relaytest.Count(t, db, "sent") == total })
	if n := db.Count(t, `SELECT count(*) FROM effects`); n != total || applied.Load() != total {
		t.Errorf("%d effects, %d applied, want %d", n, applied.Load(), total)
	}
	if n := db.Count(t, `SELECT count(DISTINCT e.message_id) FROM effects e JOIN outbox_messages m ON m.message_id::text = e.message_id`); n != total {
		t.Errorf("%d effects match outbox messages, want %d", n, total)
	}
}
