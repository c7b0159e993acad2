package outboxkafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func TestNewRefusesUnsafeClients(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		cfg  *outboxkafka.Config
		want string
	}{
		{"leader acks", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}, nil, "all in-sync replicas"},
		{"no idempotence", []kgo.Opt{kgo.DisableIdempotentWrite()}, nil, "idempotent"},
		{"cancellable in-flight", []kgo.Opt{kgo.AllowIdempotentProduceCancellation()}, nil, "in-flight"},
		{"transactional", []kgo.Opt{kgo.TransactionalID("tx")}, nil, "transactional"},
		{"auto create", []kgo.Opt{kgo.AllowAutoTopicCreation()}, nil, "AutoCreateTopics"},
		{"negative probe timeout", nil, &outboxkafka.Config{ProbeTimeout: -1}, "ProbeTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			p, err := outboxkafka.New(cl, tc.cfg)
			if err == nil || p != nil {
				t.Fatalf("New = %v, %v; want an error", p, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	if _, err := outboxkafka.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := outboxkafka.New(cl, &outboxkafka.Config{AutoCreateTopics: true}); err != nil {
		t.Errorf("New with auto-creation asked for: %v", err)
	}
	for _, manual := range []bool{false, true} {
		opts := []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}
		if manual {
			opts = append(opts, kgo.ManualFlushing())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		p, err := outboxkafka.New(cl, nil)
		if err != nil {
			t.Fatalf("New (manual flushing %v): %v", manual, err)
		}
		if p.PublishesRuns() != manual {
			t.Errorf("manual flushing %v: PublishesRuns %v", manual, p.PublishesRuns())
		}
		p.Close()
		cl.Close()
	}
}

func TestDialErrors(t *testing.T) {
	t.Parallel()
	for _, seeds := range [][]string{nil, {""}, {"a:9092", ""}} {
		if p, err := outboxkafka.Dial(seeds, nil); err == nil {
			_ = p.Close()
			t.Errorf("Dial(%q) succeeded", seeds)
		}
	}
	if p, err := outboxkafka.Dial([]string{"127.0.0.1:1"}, nil, kgo.DisableIdempotentWrite()); err == nil {
		_ = p.Close()
		t.Error("Dial let an option disable the idempotent producer")
	}
}

// Messages that cannot be records fail permanently, without disturbing
// the rest of the batch.
func TestInvalidMessagesArePermanent(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	p := dial(t, c)
	ok := envelope("orders", "k", `1`)
	errs := publishertest.Publish(t, p, 15*time.Second, envelope("order:created", "k", `1`), nil, envelope("", "k", `1`), ok)
	for i, want := range []string{"':'", "nil envelope", "empty topic"} {
		if errs[i] == nil || publisher.Classify(errs[i]) != publisher.ClassPermanent || !strings.Contains(errs[i].Error(), want) {
			t.Errorf("message %d: %v (%v), want a permanent error saying %s", i, errs[i], publisher.Classify(errs[i]), want)
		}
	}
	if errs[3] != nil {
		t.Fatalf("the valid message failed: %v", errs[3])
	}
}

func TestValidTopic(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"orders", "order.created", "A-b_c.9", strings.Repeat("x", 249), "..."} {
		if err := outboxkafka.ValidTopic(ok); err != nil {
			t.Errorf("ValidTopic(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a:b", "a b", "a/b", "é", strings.Repeat("x", 250)} {
		if outboxkafka.ValidTopic(bad) == nil {
			t.Errorf("ValidTopic(%q) accepted it", bad)
		}
	}
}

// The record: message-id first, an empty payload as an empty value (not
// a tombstone), no key when the message has none, and a producer header
// named message-id cannot pass for the real id.
func TestRecordShape(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	p := dial(t, c)
	env := envelope("orders", "", `x`)
	env.Payload = nil
	env.Headers[outboxkafka.HeaderMessageID] = "forged"
	env.Headers["b-header"], env.Headers["a-header"] = "2", "1"
	if errs := publishertest.Publish(t, p, 15*time.Second, env); errs[0] != nil {
		t.Fatal(errs[0])
	}
	r := newConsumer(t, c.ListenAddrs(), "orders").readN(t, 1, 10*time.Second)[0]
	if r.Value == nil || len(r.Value) != 0 {
		t.Errorf("value %v, want empty and not null", r.Value)
	}
	if r.Key != nil {
		t.Errorf("key %q, want none", r.Key)
	}
	var names []string
	ids := 0
	for _, h := range r.Headers {
		names = append(names, h.Key)
		if h.Key == outboxkafka.HeaderMessageID {
			ids++
		}
	}
	if names[0] != outboxkafka.HeaderMessageID || string(r.Headers[0].Value) != env.ID || ids != 1 {
		t.Errorf("headers %v, want one %s = %s, first", r.Headers, outboxkafka.HeaderMessageID, env.ID)
	}
	if got := strings.Join(names[1:], ","); got != "a-header,b-header,content-type,outbox-topic" {
		t.Errorf("headers after the id: %s, want them sorted", got)
	}
}

// Close of a Dial publisher closes its client; Close of a New publisher
// leaves the caller's client working. Either way Publish then fails.
func TestClose(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	own := dial(t, c)
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	if err := own.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := own.Client().ProduceSync(t.Context(), &kgo.Record{Topic: "orders"}).FirstErr(); !errors.Is(err, kgo.ErrClientClosed) {
		t.Errorf("Dial's client after Close: %v, want closed", err)
	}
	if errs := publishertest.Publish(t, own, time.Second, envelope("orders", "k", `1`)); !errors.Is(errs[0], outboxkafka.ErrClosed) {
		t.Errorf("Publish after Close: %v", errs[0])
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	theirs, err := outboxkafka.New(cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if errs := publishertest.Publish(t, theirs, 15*time.Second, envelope("orders", "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	_ = theirs.Close()
	if errs := publishertest.Publish(t, theirs, time.Second, envelope("orders", "k", `2`)); errs[0] == nil {
		t.Error("Publish after Close succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("still open")}).FirstErr(); err != nil {
		t.Errorf("the caller's client after Close: %v", err)
	}
}

// Closing a Dial publisher while a publish waits for the broker ends that
// publish at once, as an unknown outcome, not success.
func TestCloseDuringPublish(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	p := dial(t, c)
	if errs := publishertest.Publish(t, p, 15*time.Second, envelope("orders", "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	refused := blockProduce(c)
	done := make(chan []error, 1)
	go func() { done <- publishertest.Publish(t, p, time.Minute, envelope("orders", "k", `2`)) }()
	relaytest.WaitFor(t, 10*time.Second, "the record to reach the broker", func() bool { return refused.Load() > 0 })
	_ = p.Close()
	select {
	case errs := <-done:
		if errs[0] == nil || publisher.Classify(errs[0]) == publisher.ClassPermanent {
			t.Fatalf("publish cut by Close: %v (%v), want a retried error", errs[0], publisher.Classify(errs[0]))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Publish did not return after Close")
	}
}
