package outboxkinesis_test

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/publisher/outboxkinesis"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestOutage runs the outage test with the local Kinesis server
// unreachable for 10 s: every connection of the publisher's client cut
// and refused at a TCP proxy (the server itself keeps running, so what
// it stored before is read back after). A call cut after it was sent may
// have stored its records: those arrive twice, the first copy in order.
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, brokertest.Outage{Name: "ProxyRefuses", Start: func(t *testing.T) *brokertest.OutageTarget {
		admin := local(t)
		proxy := faultproxy.Start(t, strings.TrimPrefix(endpoint, "http://"))
		p, err := outboxkinesis.New(newClient(t, "http://"+proxy.Addr(), nil, 0), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		stream := newStream(t, admin, 2)
		return &brokertest.OutageTarget{
			Publisher:   p,
			Destination: stream,
			Arrivals: func(t *testing.T) []publishertest.Received {
				var out []publishertest.Received
				for _, r := range readAll(t, admin, stream) {
					out = append(out, received(t, stream, r))
				}
				return out
			},
			Down:        func(*testing.T) { proxy.SetMode(faultproxy.Refuse) },
			Up:          func(*testing.T) { proxy.SetMode(faultproxy.Pass) },
			MaxAttempts: 3,
		}
	}})
}
