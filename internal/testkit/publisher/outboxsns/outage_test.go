package outboxsns_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/sqstest"
	"github.com/txoutbox/outbox/publisher/outboxsns"
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
		arn := createTopic(t, s, sqstest.RandomName("outboxoutage-")+".fifo")
		url := subscribedQueue(t, s, q, arn, true)
		proxy, through := sqstest.Proxy(t)
		p, err := outboxsns.New(newSNS(through), &outboxsns.Config{TopicARN: arn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return &brokertest.OutageTarget{
			Publisher:   p,
			Destination: arn,
			Arrivals:    sqstest.Arrivals(t, q, url),
			Down:        func(*testing.T) { proxy.SetMode(faultproxy.Refuse) },
			Up:          func(*testing.T) { proxy.SetMode(faultproxy.Pass) },
			MaxAttempts: 3,
		}
	}})
}
