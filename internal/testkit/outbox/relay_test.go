package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
)

func TestRelayDeliversEverything(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		ctx := context.Background()
		s := newSink()
		r := newRelay(t, h, harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(s.publish)}))
		var want []string
		for i := 0; i < 5; i++ {
			ids := enqueue(t, h, ctx, msgs(100, "order.created", func(j int) string { return []string{"a", "b", "c", ""}[j%4] }))
			want = append(want, ids...)
		}
		relaytest.Run(t, r)
		relaytest.WaitFor(t, 30*time.Second, "500 deliveries", func() bool { return s.distinct() == 500 })
		for _, id := range want {
			if s.count[id] != 1 {
				t.Fatalf("message %s delivered %d times", id, s.count[id])
			}
		}
		relaytest.WaitFor(t, 10*time.Second, "rows marked sent", func() bool {
			return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'") == 500
		})
	})
}
