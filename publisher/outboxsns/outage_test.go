package outboxsns_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/brokertest"
	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxsns"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestOutage runs the outage test on a FIFO topic with a FIFO queue
// subscribed (raw message delivery; each key's order is checked there)
// with the local server unreachable for 10 s: every connection of the
// publisher's client cut and refused at a TCP proxy, the server itself
// running on.
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, brokertest.Outage{Name: "ProxyRefuses", Start: func(t *testing.T) *brokertest.OutageTarget {
		s, q := clients(t)
		arn := createTopic(t, s, randomName("outboxoutage-")+".fifo")
		url := subscribedQueue(t, s, q, arn, true)
		proxy := faultproxy.Start(t, strings.TrimPrefix(endpoint, "http://"))
		p, err := outboxsns.New(newSNS("http://"+proxy.Addr()), &outboxsns.Config{TopicARN: arn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		var mu sync.Mutex
		var got []publishertest.Received
		relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error {
			return outboxsqs.Consume(ctx, q, url, func(_ context.Context, m *inbox.Message) error {
				mu.Lock()
				got = append(got, publishertest.Received{ID: m.ID, Key: m.Key, Topic: m.Topic, Payload: m.Payload, Headers: m.Headers})
				mu.Unlock()
				return nil
			}, &outboxsqs.ConsumeOptions{WaitTime: time.Second, Logger: quiet})
		})
		return &brokertest.OutageTarget{
			Publisher:   p,
			Destination: arn,
			Arrivals: func(*testing.T) []publishertest.Received {
				mu.Lock()
				defer mu.Unlock()
				return append([]publishertest.Received(nil), got...)
			},
			Down:        func(*testing.T) { proxy.SetMode(faultproxy.Refuse) },
			Up:          func(*testing.T) { proxy.SetMode(faultproxy.Pass) },
			MaxAttempts: 3,
		}
	}})
}
