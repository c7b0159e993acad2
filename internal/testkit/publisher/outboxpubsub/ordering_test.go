package outboxpubsub_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxpubsub"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// consumed runs Consume on sub until the test ends and returns a
// function that waits for n handled messages and returns them in the
// order the handler saw them.
func consumed(t *testing.T, sub interface {
	ID() string
}, run func(ctx context.Context, h func(context.Context, *inbox.Message) error) error, h func(context.Context, *inbox.Message) error) func(n int) []*inbox.Message {
	t.Helper()
	var mu sync.Mutex
	var got []*inbox.Message
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, func(ctx context.Context, m *inbox.Message) error {
			if h != nil {
				if err := h(ctx, m); err != nil {
					return err
				}
			}
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Consume of %s: %v", sub.ID(), err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Consume of %s did not return after its context ended", sub.ID())
		}
	})
	return func(n int) []*inbox.Message {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			k := len(got)
			out := append([]*inbox.Message(nil), got...)
			mu.Unlock()
			if k >= n {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d messages handled after 20 s, want %d", k, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestOrderPerKeyThroughOrderedSubscription publishes rounds of
// messages over several keys, a run of each key per call as the relay
// sends them to a RunPublisher, and reads them with Consume from a
// subscription with message ordering enabled: each key's messages reach
// the handler in the order they were enqueued.
func TestOrderPerKeyThroughOrderedSubscription(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("orders-"))
	sub := createSubscription(t, c, topic, true)
	p := newPublisher(t, c, nil)
	if !p.PublishesRuns() {
		t.Fatal("PublishesRuns is false with ordering on")
	}
	const keys, rounds, run = 4, 5, 3
	for r := range rounds {
		var batch []*publisher.Envelope
		for k := range keys {
			for i := range run {
				batch = append(batch, envelope(topic, fmt.Sprintf("key-%d", k), fmt.Sprintf(`{"k":%d,"seq":%d}`, k, r*run+i)))
			}
		}
		for i, err := range publish(t, p, batch...) {
			if err != nil {
				t.Fatalf("round %d, message %d: %v", r, i, err)
			}
		}
	}
	for _, m := range stored(t, srv, topic, keys*rounds*run, 10*time.Second) {
		if want := m.Attributes[publisher.HeaderBusinessKey]; m.OrderingKey != want {
			t.Fatalf("ordering key %q, want the business key %q", m.OrderingKey, want)
		}
	}
	wait := consumed(t, sub, func(ctx context.Context, h func(context.Context, *inbox.Message) error) error {
		return outboxpubsub.Consume(ctx, sub, h, nil)
	}, nil)
	last := map[string]int{}
	for _, m := range wait(keys * rounds * run) {
		var k, seq int
		if _, err := fmt.Sscanf(string(m.Payload), `{"k":%d,"seq":%d}`, &k, &seq); err != nil {
			t.Fatalf("payload %q: %v", m.Payload, err)
		}
		if m.Key != fmt.Sprintf("key-%d", k) {
			t.Fatalf("message %s: key %q, payload %s", m.ID, m.Key, m.Payload)
		}
		if prev, ok := last[m.Key]; ok && seq != prev+1 {
			t.Fatalf("key %s: seq %d handled after %d", m.Key, seq, prev)
		}
		last[m.Key] = seq
	}
}

// TestFailedKeyWaitsForTheRelaysRetry fails the Publish RPC of one key's
// first message with a real gRPC status. The client pauses that key, so
// the key's next message in the same call is not sent ahead of the
// failed one: it fails as "not sent", nothing of the key reaches the
// topic, and another key's message in the call is delivered. The key is
// resumed only when the relay brings it again (its failed message first),
// and then both arrive in order.
//
// The first message is made a little over the client's 1 MB bundle
// threshold, so that it is sent in a request of its own and the second
// waits in the next bundle of its key while the first fails: the case
// where resuming the key too early would let the second overtake it.
func TestFailedKeyWaitsForTheRelaysRetry(t *testing.T) {
	t.Parallel()
	fail := &failPublish{}
	srv := fakeServer(t, fail.option())
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("orders-"))
	sub := createSubscription(t, c, topic, true)
	p := newPublisher(t, c, nil)

	big := `"` + strings.Repeat("x", 1<<20) + `"`
	k1 := envelope(topic, "K", big)
	k2 := envelope(topic, "K", `"second"`)
	other := envelope(topic, "L", `"other key"`)
	fail.set(func(req *pb.PublishRequest) error {
		for _, m := range req.Messages {
			if m.Attributes[outboxpubsub.AttrMessageID] == k1.ID {
				return status.Error(codes.Unavailable, "injected: the service did not take the request")
			}
		}
		return nil
	})
	errs := publish(t, p, k1, k2, other)
	publishertest.WantClass(t, "first message of K", errs[0], publisher.ClassUnavailable, "UNAVAILABLE", "injected")
	if errs[1] == nil {
		t.Fatal("second message of K confirmed after the first failed")
	}
	if c := publisher.Classify(errs[1]); c == publisher.ClassPermanent {
		t.Fatalf("second message of K: %v is permanent", errs[1])
	}
	if !strings.Contains(errs[1].Error(), `earlier message of ordering key "K" failed`) {
		t.Fatalf("second message of K: %v, want it held behind the first", errs[1])
	}
	if errs[2] != nil {
		t.Fatalf("message of key L: %v", errs[2])
	}
	got := stored(t, srv, topic, 1, 10*time.Second)
	if len(got) != 1 || got[0].Attributes[outboxpubsub.AttrMessageID] != other.ID {
		t.Fatalf("topic holds %d messages after the failure, want only key L's", len(got))
	}

	// A later call without K leaves K alone; the relay's retry of K
	// brings the failed message first.
	if errs := publish(t, p, envelope(topic, "L", `"other key again"`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	fail.set(nil)
	for i, err := range publish(t, p, k1, k2) {
		if err != nil {
			t.Fatalf("retry of K, message %d: %v", i, err)
		}
	}
	var order []string
	for _, m := range stored(t, srv, topic, 4, 10*time.Second) {
		if m.OrderingKey == "K" {
			order = append(order, m.Attributes[outboxpubsub.AttrMessageID])
		}
	}
	if len(order) != 2 || order[0] != k1.ID || order[1] != k2.ID {
		t.Fatalf("key K arrived as %v, want [%s %s]", order, k1.ID, k2.ID)
	}
	wait := consumed(t, sub, func(ctx context.Context, h func(context.Context, *inbox.Message) error) error {
		return outboxpubsub.Consume(ctx, sub, h, nil)
	}, nil)
	var handled []*inbox.Message
	for _, m := range wait(4) {
		if m.Key == "K" {
			handled = append(handled, m)
		}
	}
	if len(handled) != 2 || handled[0].ID != k1.ID || !bytes.Equal(handled[0].Payload, k1.Payload) || handled[1].ID != k2.ID {
		t.Fatalf("key K handled as %d messages, want %s then %s", len(handled), k1.ID, k2.ID)
	}
	if fail.failed() != 1 {
		t.Fatalf("%d Publish requests failed, want 1", fail.failed())
	}
}
