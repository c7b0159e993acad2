package outboxredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/publisher/outboxredis"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// target is the local Redis: each destination is a fresh stream created
// by the test with the group "consumers" (streams are not created by the
// publisher), read back with XREAD from the start, or by Consume as two
// consumers of the group. The publisher's client reaches the server
// through a fault proxy, so that its connections can be cut; the readers
// connect directly. A key that is not a stream, and a stream that does
// not exist, are the bad destinations.
func target(t *testing.T) *brokertest.Target {
	admin := localClient(t)
	proxy := faultproxy.Start(t, redisAddr)
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	p, err := outboxredis.New(client, &outboxredis.Config{CloseClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &brokertest.Target{
		Target: publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				name := streamName(t, admin, "suite")
				createStream(t, admin, name)
				return name
			},
			MissingDestination: func(t *testing.T) string {
				return streamName(t, admin, "missing")
			},
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				got := waitEntries(t, admin, dest, n, 20*time.Second)
				out := make([]publishertest.Received, len(got))
				for i, e := range got {
					out[i] = e.Received
				}
				return out
			},
			Disconnect: proxy.Disconnect,
			Features:   publishertest.Features{Keys: true, ArbitraryHeaders: true, MissingDestinationIsPermanent: true},
		},
		Consume: func(t *testing.T, dest string, h brokertest.Handler) {
			for _, name := range []string{"c1", "c2"} {
				consume(t, admin, dest, name, fast, h)
			}
		},
		PublishForeign: func(t *testing.T, dest string) {
			mustDo(t, admin, "XADD", dest, "*", "payload", "not from the outbox")
		},
		Settled: func(t *testing.T, dest string) bool {
			p, err := admin.XPending(context.Background(), dest, "consumers").Result()
			return err == nil && p.Count == 0
		},
		Stored: func(t *testing.T, dest string) int { return int(admin.XLen(context.Background(), dest).Val()) },
		BadDestinations: func(t *testing.T) []brokertest.BadDestination {
			wrong := streamName(t, admin, "wrongtype")
			mustDo(t, admin, "SET", wrong, "a string")
			missing := streamName(t, admin, "missing")
			return []brokertest.BadDestination{
				{Topic: wrong, Says: []string{"WRONGTYPE", "not a stream", wrong}, Check: func(t *testing.T) {
					if typ, _ := admin.Type(context.Background(), wrong).Result(); typ != "string" {
						t.Errorf("%s became a %s", wrong, typ)
					}
				}},
				{Topic: missing, Says: []string{"does not exist", "create=true", missing}, Check: func(t *testing.T) {
					if n, _ := admin.Exists(context.Background(), missing).Result(); n != 0 {
						t.Errorf("the relay created %s", missing)
					}
				}},
			}
		},
		URL: "redis://" + redisAddr + "/0",
		// Two consumers of a group run their handlers side by side.
		Broker: brokertest.Features{KeepsOrder: false},
	}
}

// TestSuites runs the conformance, consume and relay suites on the local Redis.
func TestSuites(t *testing.T) {
	brokertest.Run(t, target)
}

// TestCrashEndToEnd runs the crash test on the local Redis.
func TestCrashEndToEnd(t *testing.T) {
	brokertest.RunCrash(t, target)
}

// TestOutage runs the outage test with a Redis of the test's own killed
// (SIGKILL) and restarted on the same port and data directory. With
// appendfsync always a confirmed entry is on disk, so it survives the
// kill (see docs/brokers/redis.md on what a confirmation means).
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, brokertest.Outage{Name: "ServerKilled", Start: func(t *testing.T) *brokertest.OutageTarget {
		srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
		admin := srv.client(t, nil)
		const stream = "orders"
		createStream(t, admin, stream)
		return &brokertest.OutageTarget{
			Publisher:   newPublisher(t, srv.client(t, nil), nil),
			Destination: stream,
			Arrivals: func(t *testing.T) []publishertest.Received {
				var out []publishertest.Received
				for _, e := range readAll(t, admin, stream) {
					out = append(out, e.Received)
				}
				return out
			},
			Down: func(*testing.T) { srv.kill() },
			Up:   func(*testing.T) { srv.start() },
			// One attempt, or two for a message caught in flight by the
			// kill.
			MaxAttempts: 2,
		}
	}})
}
