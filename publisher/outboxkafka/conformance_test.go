package outboxkafka_test

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestConformance runs the publisher suite against an in-process Kafka
// of three brokers that creates no topics by itself; a plain kgo consumer
// reads what arrived. The cluster keeps its data in a directory, so that
// cutting the connection can stop it and restoring it start it again on
// the same ports with the same topics and records, as a restart would (a
// kfake broker advertises its own address, so a proxy in front of it
// would be bypassed).
func TestConformance(t *testing.T) {
	t.Parallel()
	publishertest.Run(t, func(t *testing.T) *publishertest.Target {
		opts := []kfake.Opt{kfake.NumBrokers(3), kfake.DataDir(t.TempDir())}
		c := newCluster(t, opts...)
		addrs := c.ListenAddrs() // the same across restarts
		ports := make([]int, len(addrs))
		for i, addr := range addrs {
			_, port, err := net.SplitHostPort(addr)
			if err == nil {
				ports[i], err = strconv.Atoi(port)
			}
			if err != nil {
				t.Fatalf("broker address %q: %v", addr, err)
			}
		}
		p := dial(t, c)
		var mu sync.Mutex // guards c
		return &publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				topic := randomTopic("conformance")
				createTopic(t, addrs, 4, topic)
				return topic
			},
			MissingDestination: func(*testing.T) string { return randomTopic("missing") },
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				var out []publishertest.Received
				for _, r := range newConsumer(t, addrs, dest).readN(t, n, 20*time.Second) {
					out = append(out, received(r))
				}
				return out
			},
			Disconnect: func(t *testing.T) func() {
				mu.Lock()
				defer mu.Unlock()
				c.Close()
				return func() {
					mu.Lock()
					defer mu.Unlock()
					c = newCluster(t, append(opts, kfake.Ports(ports...))...)
				}
			},
			Features: publishertest.Features{Keys: true, ArbitraryHeaders: true, MissingDestinationIsPermanent: true},
		}
	})
}
