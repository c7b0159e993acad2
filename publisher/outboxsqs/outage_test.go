package outboxsqs_test

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
	"github.com/txoutbox/outbox/publisher/outboxsqs"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// arrivals runs Consume on the queue at url (on a client of the server
// itself, not through any proxy) until the test ends, and returns what
// it handed over so far, in order, redeliveries included.
func arrivals(t *testing.T, url string) func(*testing.T) []publishertest.Received {
	var mu sync.Mutex
	var got []publishertest.Received
	c := client(t)
	relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error {
		return outboxsqs.Consume(ctx, c, url, func(_ context.Context, m *inbox.Message) error {
			mu.Lock()
			got = append(got, publishertest.Received{ID: m.ID, Key: m.Key, Topic: m.Topic, Payload: m.Payload, Headers: m.Headers})
			mu.Unlock()
			return nil
		}, &outboxsqs.ConsumeOptions{WaitTime: time.Second, Logger: quiet})
	})
	return func(*testing.T) []publishertest.Received {
		mu.Lock()
		defer mu.Unlock()
		return append([]publishertest.Received(nil), got...)
	}
}

// TestOutage runs the outage test on a FIFO queue (each key's order is
// checked) with the local server unreachable for 10 s: every connection
// of the publisher's client cut and refused at a TCP proxy, the server
// itself running on.
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, brokertest.Outage{Name: "ProxyRefuses", Start: func(t *testing.T) *brokertest.OutageTarget {
		c := client(t)
		name := randomName("outboxoutage-") + ".fifo"
		url := createQueue(t, c, name, nil)
		proxy := faultproxy.Start(t, strings.TrimPrefix(endpoint, "http://"))
		p, err := outboxsqs.New(newClient("http://"+proxy.Addr()), &outboxsqs.Config{QueueName: name, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return &brokertest.OutageTarget{
			Publisher:   p,
			Destination: name,
			Arrivals:    arrivals(t, url),
			Down:        func(*testing.T) { proxy.SetMode(faultproxy.Refuse) },
			Up:          func(*testing.T) { proxy.SetMode(faultproxy.Pass) },
			MaxAttempts: 3,
		}
	}})
}
