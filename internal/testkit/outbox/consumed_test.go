package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestMarkConsumed(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		ctx := context.Background()
		ids := enqueue(t, h, ctx, msgs(2, "a.b", nil))
		drv := h.DB.Std
		if err := outbox.MarkConsumed(ctx, drv, ids[0]); !errors.Is(err, outbox.ErrNotSent) {
			t.Fatalf("pending message: %v", err)
		}
		if err := outbox.MarkConsumed(ctx, drv, "0192f0c4-3a6e-7cc4-9a3b-000000000000"); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		s := newSink()
		r := newRelay(t, h, harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(s.publish)}))
		relaytest.Run(t, r)
		relaytest.WaitFor(t, 20*time.Second, "sent", func() bool {
			return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'") == 2
		})
		for i := 0; i < 2; i++ { // idempotent
			if err := outbox.MarkConsumed(ctx, drv, ids[0]); err != nil {
				t.Fatalf("mark consumed: %v", err)
			}
		}
		if n := h.DB.Count(t, testdb.Placeholder(h.DB.Dialect, "SELECT count(*) FROM outbox_messages WHERE status = 'consumed' AND consumed_at IS NOT NULL AND message_id = ?"), ids[0]); n != 1 {
			t.Fatalf("consumed rows: %d", n)
		}
	})
}
