package outboxpubsub_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxpubsub"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestConsumeRoundTrip publishes a message with a key, a producer header
// and a trace, and consumes it with a handler that fails on the first
// delivery: the message is nacked and redelivered, and the handler gets
// the same id, topic, key, headers and payload, with the producer's
// trace in its context, each time.
func TestConsumeRoundTrip(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("orders-"))
	sub := createSubscription(t, c, topic, true)
	p := newPublisher(t, c, nil)
	env := publishertest.Envelope(topic, "order-42", []byte(`{"total":12}`), "application/json",
		map[string]string{"x-tenant": "acme", publisher.HeaderTraceParent: traceParent})
	if errs := publish(t, p, env); errs[0] != nil {
		t.Fatal(errs[0])
	}
	var mu sync.Mutex
	deliveries := 0
	wait := consumed(t, sub, func(ctx context.Context, h func(context.Context, *inbox.Message) error) error {
		return outboxpubsub.Consume(ctx, sub, h, nil)
	}, func(ctx context.Context, m *inbox.Message) error {
		if sc := trace.SpanContextFromContext(ctx); sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !sc.IsRemote() {
			t.Errorf("handler context carries trace %v, want the producer's", sc.TraceID())
		}
		mu.Lock()
		defer mu.Unlock()
		deliveries++
		if deliveries == 1 {
			return errors.New("first delivery fails")
		}
		return nil
	})
	m := wait(1)[0]
	mu.Lock()
	n := deliveries
	mu.Unlock()
	if n != 2 {
		t.Fatalf("handler called %d times, want 2 (a failure, then the redelivery)", n)
	}
	if m.ID != env.ID || m.Topic != env.Topic || m.Key != "order-42" || m.ContentType != "application/json" || !bytes.Equal(m.Payload, env.Payload) {
		t.Fatalf("decoded %+v", m)
	}
	if m.Headers["x-tenant"] != "acme" || m.Headers[publisher.HeaderTraceParent] != traceParent || m.Headers[outboxpubsub.AttrMessageID] != env.ID {
		t.Fatalf("headers %v", m.Headers)
	}
	waitAcked(t, srv, stored(t, srv, topic, 1, time.Second)[0].ID)
}

// TestCloudEventsRoundTrip publishes with format=cloudevents and checks
// the message against the CloudEvents Pub/Sub binding (ce- attributes,
// content-type, no outbox-* attributes), then that Decode and Consume
// recognise the event and give the message the plain wire would have.
func TestCloudEventsRoundTrip(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("orders-"))
	sub := createSubscription(t, c, topic, true)
	p := newPublisher(t, c, &outboxpubsub.Config{CloudEvents: &outboxce.Format{Mode: outboxce.Binary, Source: "/orders"}})
	env := publishertest.Envelope(topic, "order-7", []byte(`{"n":7}`), "application/json",
		map[string]string{"x-tenant": "acme", publisher.HeaderTraceParent: traceParent})
	env.Topic = "order.created"
	env.Headers[publisher.HeaderTopic] = env.Topic
	if errs := publish(t, p, env); errs[0] != nil {
		t.Fatal(errs[0])
	}
	a := stored(t, srv, topic, 1, 10*time.Second)[0].Attributes
	for k, want := range map[string]string{
		"ce-specversion": "1.0", "ce-id": env.ID, "ce-source": "/orders", "ce-type": "order.created",
		"ce-subject": "order-7", "content-type": "application/json", "ce-traceparent": traceParent,
		"traceparent": traceParent, "x-tenant": "acme", outboxpubsub.AttrMessageID: env.ID,
	} {
		if a[k] != want {
			t.Errorf("attribute %s = %q, want %q", k, a[k], want)
		}
	}
	if _, ok := a["ce-time"]; !ok {
		t.Error("no ce-time attribute")
	}
	for _, k := range []string{publisher.HeaderTopic, publisher.HeaderBusinessKey, "ce-datacontenttype"} {
		if _, ok := a[k]; ok {
			t.Errorf("attribute %s present in a CloudEvent", k)
		}
	}
	// Decode alone: an event without message-id still decodes by ce-id.
	plain := map[string]string{}
	for k, v := range a {
		if k != outboxpubsub.AttrMessageID {
			plain[k] = v
		}
	}
	m, err := outboxpubsub.Decode(&pubsub.Message{Data: env.Payload, Attributes: plain})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != env.ID || m.Topic != "order.created" || m.Key != "order-7" || m.Headers[publisher.HeaderTopic] != "order.created" {
		t.Fatalf("decoded %+v", m)
	}
	wait := consumed(t, sub, func(ctx context.Context, h func(context.Context, *inbox.Message) error) error {
		return outboxpubsub.Consume(ctx, sub, h, nil)
	}, nil)
	got := wait(1)[0]
	if got.ID != env.ID || got.Topic != "order.created" || got.Key != "order-7" || got.ContentType != "application/json" || !bytes.Equal(got.Payload, env.Payload) {
		t.Fatalf("consumed %+v", got)
	}
}

// TestCloudEventsRefusesAttributeHeaders: a producer header the binding
// would read as a CloudEvents attribute but that is none is permanent.
func TestCloudEventsRefusesAttributeHeaders(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("orders-"))
	p := newPublisher(t, c, &outboxpubsub.Config{CloudEvents: &outboxce.Format{Mode: outboxce.Binary}})
	env := publishertest.Envelope(topic, "k", []byte(`1`), "application/json", map[string]string{"ce-id": "forged"})
	publishertest.WantClass(t, "ce-id header", publish(t, p, env)[0], publisher.ClassPermanent, "ce-id")
}

// TestDecodeRejects: a message without message-id is not the relay's;
// a CloudEvent with a bad specversion is refused; both are acked and
// dropped by Consume, which goes on with the next message.
func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	if _, err := outboxpubsub.Decode(&pubsub.Message{ID: "1", Data: []byte("x"), Attributes: map[string]string{"a": "b"}}); !errors.Is(err, outboxpubsub.ErrNoMessageID) {
		t.Fatalf("Decode without message-id: %v, want ErrNoMessageID", err)
	}
	if _, err := outboxpubsub.Decode(&pubsub.Message{ID: "2", Attributes: map[string]string{"ce-specversion": "0.3", "ce-id": "x", "ce-type": "t"}}); err == nil {
		t.Fatal("Decode accepted specversion 0.3")
	}
	m, err := outboxpubsub.Decode(&pubsub.Message{ID: "3", OrderingKey: "ok", Attributes: map[string]string{"Message-ID": "id-1", "message-id": "id-2"}})
	if err != nil || m.ID != "id-2" || m.Key != "ok" {
		t.Fatalf("Decode: %+v, %v; want id-2 (the lower-case attribute wins) and the ordering key as key", m, err)
	}

	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("orders-"))
	sub := createSubscription(t, c, topic, false)
	foreign := srv.Publish(topicPath(topic), []byte("not from the outbox"), nil)
	p := newPublisher(t, c, nil)
	env := envelope(topic, "", `{"ok":true}`)
	if errs := publish(t, p, env); errs[0] != nil {
		t.Fatal(errs[0])
	}
	wait := consumed(t, sub, func(ctx context.Context, h func(context.Context, *inbox.Message) error) error {
		return outboxpubsub.Consume(ctx, sub, h, nil)
	}, nil)
	if got := wait(1); got[0].ID != env.ID {
		t.Fatalf("handled %s, want %s", got[0].ID, env.ID)
	}
	waitAcked(t, srv, foreign)
}

// waitAcked waits until the server recorded an ack of message id.
func waitAcked(t *testing.T, srv *pstest.Server, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Message(id).Acks == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("message %s was never acked", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConsumeMissingSubscription: Consume returns a one-line error when
// the subscription does not exist.
func TestConsumeMissingSubscription(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := outboxpubsub.Consume(ctx, c.Subscriber("nosuch"), func(context.Context, *inbox.Message) error { return nil }, nil)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Consume of a missing subscription: %v (context %v)", err, ctx.Err())
	}
	t.Log(err)
}
