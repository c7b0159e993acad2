package outbox_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
)

// panicky publishes whole batches to a sink, and panics on any batch that
// holds the poison message — after publishing the messages before it, as
// a publisher that crashes half-way would.
type panicky struct {
	s      *sink
	poison string
	panics atomic.Int64
}

func (p *panicky) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	for _, env := range batch {
		if env.ID == p.poison {
			p.panics.Add(1)
			panic("publisher bug: cannot encode " + env.ID)
		}
		_ = p.s.publish(ctx, env)
	}
	return make([]error, len(batch))
}

func (p *panicky) Close() error { return nil }

// TestRelayContainsPublisherPanic: a message that makes the publisher
// panic does not crash the relay. Its batch-mates are published one by
// one and sent; it is retried as an attempt of unknown outcome and goes
// dead after its max_attempts, with the panic as its error; messages
// enqueued after it keep flowing.
func TestRelayContainsPublisherPanic(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		ctx := context.Background()
		before := enqueue(t, h, ctx, msgs(30, "order.created", nil))
		poison := enqueue(t, h, ctx, []outbox.Message{{Topic: "order.created", Payload: []byte(`{"poison":true}`), MaxAttempts: 3}})
		after := enqueue(t, h, ctx, msgs(30, "order.created", nil))
		pub := &panicky{s: newSink(), poison: poison[0]}
		r := newRelay(t, h, harness.Config(outbox.Route{Pattern: "*", Publisher: pub}))
		relaytest.Run(t, r) // fails the test if Run returns an error
		relaytest.WaitFor(t, 30*time.Second, "the poison message dead", func() bool {
			return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead'") == 1
		})
		relaytest.WaitFor(t, 30*time.Second, "every other message sent", func() bool {
			return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'") == len(before)+len(after)
		})
		row := listOne(t, h, poison[0])
		if row.Status != "dead" || row.Attempts != 3 || !strings.Contains(row.LastError, "publisher panicked: publisher bug: cannot encode "+poison[0]) {
			t.Errorf("poison message: %+v", row)
		}
		if n := pub.panics.Load(); n < 3 {
			t.Errorf("the publisher panicked %d times, want one per attempt (3) at least", n)
		}
		pub.s.mu.Lock()
		reached := pub.s.count[poison[0]]
		pub.s.mu.Unlock()
		if reached != 0 {
			t.Errorf("the poison message reached the sink")
		}
		if d := pub.s.distinct(); d != len(before)+len(after) {
			t.Errorf("%d distinct messages reached the sink, want %d", d, len(before)+len(after))
		}
	})
}
