package outboxsqs_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/sqstest"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
)

// TestOutage runs the outage test on a FIFO queue (each key's order is
// checked) with the local server unreachable for 10 s: every connection
// of the publisher's client cut and refused at a TCP proxy, the server
// itself running on.
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, brokertest.Outage{Name: "ProxyRefuses", Start: func(t *testing.T) *brokertest.OutageTarget {
		c := sqstest.Client(t)
		name := sqstest.RandomName("outboxoutage-") + ".fifo"
		url := sqstest.CreateQueue(t, c, name, nil)
		proxy, through := sqstest.Proxy(t)
		p, err := outboxsqs.New(sqstest.NewClient(through), &outboxsqs.Config{QueueName: name, Logger: sqstest.Quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return &brokertest.OutageTarget{
			Publisher:   p,
			Destination: name,
			Arrivals:    sqstest.Arrivals(t, c, url),
			Down:        func(*testing.T) { proxy.SetMode(faultproxy.Refuse) },
			Up:          func(*testing.T) { proxy.SetMode(faultproxy.Pass) },
			MaxAttempts: 3,
		}
	}})
}
