package outboxnats_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxnats"
)

const testTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// durable creates an explicit-ack pull consumer on stream.
func durable(t *testing.T, js jetstream.JetStream, stream string) jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "inventory", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("create consumer on %s: %v", stream, err)
	}
	return c
}

// consume runs Consume in the background until the test ends, then
// checks it returned nil.
func consume(t *testing.T, c jetstream.Consumer, h func(context.Context, *inbox.Message) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- outboxnats.Consume(ctx, c, h, nil) }()
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

// effects makes the effect table of a test database.
func effects(t *testing.T, db *testdb.DB) {
	t.Helper()
	db.Exec(t, `CREATE TABLE effects (message_id text NOT NULL)`)
}

func TestConsumeDecodes(t *testing.T) {
	t.Parallel()
	_, js := connect(t)
	stream := newStream(t, js, nil)
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	subject := stream + ".order.created"
	env := &outbox.Envelope{ID: uuid.NewString(), Topic: "order.created", Key: "order-42", Destination: subject, Payload: []byte(`{"order_id":42}`),
		Headers: map[string]string{"outbox-topic": "order.created", "outbox-business-key": "order-42", "content-type": "application/json", "traceparent": testTrace, "x-tenant": "acme"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if errs := pub.Publish(ctx, []*outbox.Envelope{env}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := make(chan *inbox.Message, 1)
	traces := make(chan string, 1)
	consume(t, durable(t, js, stream), func(ctx context.Context, m *inbox.Message) error {
		traces <- trace.SpanContextFromContext(ctx).TraceID().String()
		got <- m
		return nil
	})
	select {
	case m := <-got:
		if m.ID != env.ID || m.Topic != "order.created" || m.Key != "order-42" || m.ContentType != "application/json" || string(m.Payload) != `{"order_id":42}` {
			t.Errorf("decoded %+v, want the envelope %+v", m, env)
		}
		for k, v := range env.Headers {
			if m.Headers[k] != v {
				t.Errorf("header %s = %q, want %q", k, m.Headers[k], v)
			}
		}
		if tr := <-traces; tr != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("handler's trace id %s, want the producer's", tr)
		}
	case <-ctx.Done():
		t.Fatal("no message consumed within 10s")
	}
}

func TestDecodeRejectsMessageWithoutID(t *testing.T) {
	t.Parallel()
	nc, js := connect(t)
	stream := newStream(t, js, nil)
	if err := nc.Publish(stream+".raw", []byte("x")); err != nil {
		t.Fatal(err)
	}
	msgs := readStream(t, js, stream, 1, 10*time.Second)
	if _, err := outboxnats.Decode(msgs[0]); !errors.Is(err, outboxnats.ErrNoMessageID) {
		t.Fatalf("Decode: %v, want ErrNoMessageID", err)
	}
}

// TestConsumeRedeliversAfterHandlerError: a handler that fails the first
// time leaves nothing applied; the redelivery applies the effect once.
func TestConsumeRedeliversAfterHandlerError(t *testing.T) {
	t.Parallel()
	_, js := connect(t)
	stream := newStream(t, js, nil)
	db := newPostgres(t)
	effects(t, db)
	ib, err := inbox.New(db.PGX, &inbox.Config{Consumer: "inventory"})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := &outbox.Envelope{ID: uuid.NewString(), Topic: "t", Destination: stream + ".t", Payload: []byte(`{}`), Headers: map[string]string{}}
	if errs := pub.Publish(context.Background(), []*outbox.Envelope{env}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	var mu sync.Mutex
	calls := 0
	consume(t, durable(t, js, stream), func(ctx context.Context, m *inbox.Message) error {
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
	relaytest.WaitFor(t, 15*time.Second, "the effect applied", func() bool {
		return db.Count(t, `SELECT count(*) FROM effects`) == 1
	})
	mu.Lock()
	if calls != 2 {
		t.Errorf("effect ran %d times, want 2 (one failed, one applied)", calls)
	}
	mu.Unlock()
}

// TestConsumeEndToEnd: plain SQL inserts → relay → Consume through a
// real inbox. Every message is delivered twice (the first delivery's
// effect commits but the handler then fails, as if the ack were lost),
// and each is applied exactly once.
func TestConsumeEndToEnd(t *testing.T) {
	t.Parallel()
	_, js := connect(t)
	stream := newStream(t, js, nil)
	db := newPostgres(t)
	effects(t, db)
	const n = 20
	topic := stream + ".order"
	for i := range n {
		db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES ($1, $2, $3, $4)`,
			topic, fmt.Sprintf("key-%d", i%3), fmt.Sprintf(`{"seq":%d}`, i), `{"traceparent":"`+testTrace+`"}`)
	}
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Start(t, db, relaytest.Config(pub))
	ib, err := inbox.New(db.PGX, &inbox.Config{Consumer: "inventory"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	deliveries := map[string]int{}
	consume(t, durable(t, js, stream), func(ctx context.Context, m *inbox.Message) error {
		if m.Topic != topic || trace.SpanContextFromContext(ctx).TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("message %s: topic %q, trace %v", m.ID, m.Topic, trace.SpanContextFromContext(ctx).TraceID())
		}
		if _, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, m.ID)
			return err
		}); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		deliveries[m.ID]++
		if deliveries[m.ID] == 1 {
			return errors.New("simulated lost ack")
		}
		return nil
	})
	relaytest.WaitFor(t, 30*time.Second, "every message delivered twice", func() bool {
		mu.Lock()
		defer mu.Unlock()
		twice := 0
		for _, d := range deliveries {
			if d >= 2 {
				twice++
			}
		}
		return twice == n
	})
	if got := db.Count(t, `SELECT count(*) FROM effects`); got != n {
		t.Errorf("%d effects, want %d", got, n)
	}
	if got := db.Count(t, `SELECT count(DISTINCT message_id) FROM effects`); got != n {
		t.Errorf("%d distinct effects, want %d", got, n)
	}
	for _, id := range relaytest.SentIDs(t, db) {
		if db.Count(t, `SELECT count(*) FROM effects WHERE message_id = $1`, id) != 1 {
			t.Errorf("message %s: not applied exactly once", id)
		}
	}
}

// TestConsumeTermsUndecodable: a message without Nats-Msg-Id is
// terminated, never handed to the handler, and the next one still is.
func TestConsumeTermsUndecodable(t *testing.T) {
	t.Parallel()
	nc, js := connect(t)
	stream := newStream(t, js, nil)
	if err := nc.Publish(stream+".raw", []byte("x")); err != nil {
		t.Fatal(err)
	}
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := &outbox.Envelope{ID: uuid.NewString(), Topic: "t", Destination: stream + ".t", Payload: []byte(`{}`), Headers: map[string]string{}}
	if errs := pub.Publish(context.Background(), []*outbox.Envelope{env}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	cons := durable(t, js, stream)
	got := make(chan string, 2)
	consume(t, cons, func(_ context.Context, m *inbox.Message) error {
		got <- m.ID
		return nil
	})
	select {
	case id := <-got:
		if id != env.ID {
			t.Fatalf("handler got %q, want %s", id, env.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing consumed within 10s")
	}
	relaytest.WaitFor(t, 5*time.Second, "both messages settled", func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
	select {
	case id := <-got:
		t.Errorf("handler got a second message %q", id)
	default:
	}
}
