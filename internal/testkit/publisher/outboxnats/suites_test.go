package outboxnats_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxnats"
	"github.com/txoutbox/outbox/publisher/outboxurl"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// target is the local JetStream: each destination is a subject of a
// fresh stream, read back by an ordered consumer, or by Consume through
// a durable consumer, on a connection of their own. The publisher's
// connection goes through a fault proxy, so that it can be cut. A
// subject no stream captures is the bad destination.
func target(t *testing.T) *brokertest.Target {
	proxy, _, js := proxied(t)
	p, err := outboxnats.New(js, &outboxnats.Config{CloseConn: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	nc, consumer := connect(t)
	var mu sync.Mutex
	durables := map[string]jetstream.Consumer{}
	return &brokertest.Target{
		Target: publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				return newStream(t, consumer, nil) + ".orders"
			},
			MissingDestination: func(*testing.T) string {
				return testdb.RandomName("nostream_") + ".orders"
			},
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				var out []publishertest.Received
				for _, m := range readStream(t, consumer, streamOf(dest), n, 20*time.Second) {
					if m.Subject() != dest {
						t.Errorf("message on subject %q, want %q", m.Subject(), dest)
					}
					out = append(out, received(m))
				}
				return out
			},
			Disconnect: proxy.Disconnect,
			Features:   publishertest.Features{Keys: true, ArbitraryHeaders: true, MissingDestinationIsPermanent: true},
		},
		Consume: func(t *testing.T, dest string, h brokertest.Handler) {
			c := durable(t, consumer, streamOf(dest))
			mu.Lock()
			durables[dest] = c
			mu.Unlock()
			consume(t, c, h)
		},
		PublishForeign: func(t *testing.T, dest string) {
			if err := nc.Publish(dest, []byte("not from the outbox")); err != nil {
				t.Fatal(err)
			}
		},
		Settled: func(t *testing.T, dest string) bool {
			mu.Lock()
			c := durables[dest]
			mu.Unlock()
			info, err := c.Info(context.Background())
			return err == nil && info.NumAckPending == 0 && info.NumPending == 0
		},
		Stored: func(t *testing.T, dest string) int { return int(streamCount(t, consumer, streamOf(dest))) },
		BadDestinations: func(*testing.T) []brokertest.BadDestination {
			missing := testdb.RandomName("nostream_") + ".order.created"
			return []brokertest.BadDestination{{Topic: missing, LastError: `outboxnats: no JetStream stream for subject "` + missing + `"`}}
		},
		URL:    natsURL,
		Broker: brokertest.Features{DedupesByID: true, KeepsOrder: true},
	}
}

// TestSuites runs the conformance, consume and relay suites on the local JetStream.
func TestSuites(t *testing.T) {
	brokertest.Run(t, target)
}

// TestCrashEndToEnd runs the crash test on each database.
func TestCrashEndToEnd(t *testing.T) {
	brokertest.RunCrash(t, target, testdb.Dialects...)
}

// TestOutage runs the outage test with a JetStream server of the test's
// own killed and restarted on the same port and store. The stream
// dedupes by id, so it ends up holding each message exactly once.
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, brokertest.Outage{Name: "ServerKilled", Start: func(t *testing.T) *brokertest.OutageTarget {
		srv := startServer(t)
		_, admin := connectTo(t, srv.URL())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := admin.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTAGE", Subjects: []string{"outage.>"}, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		p, err := outboxurl.Open(srv.URL()+"?reconnect_wait=100ms&name=outage-test", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		var arrived []publishertest.Received // the stream as last read
		return &brokertest.OutageTarget{
			Publisher:   p,
			Destination: "outage.order.created",
			Arrivals: func(t *testing.T) []publishertest.Received {
				if n := int(streamCount(t, admin, "OUTAGE")); n != len(arrived) {
					arrived = nil
					for _, m := range readStream(t, admin, "OUTAGE", n, 30*time.Second) {
						arrived = append(arrived, received(m))
					}
				}
				return arrived
			},
			Down:        func(*testing.T) { srv.stop() },
			Up:          func(*testing.T) { srv.start() },
			MaxAttempts: 3,
			Check: func(t *testing.T, arrivals []publishertest.Received) {
				if n := streamCount(t, admin, "OUTAGE"); n != uint64(len(arrivals)) || len(arrivals) != 600 {
					t.Errorf("stream holds %d messages (%d read), want 600: each id once", n, len(arrivals))
				}
			},
		}
	}})
}

func TestDecodeRejectsMessageWithoutID(t *testing.T) {
	t.Parallel()
	nc, js := connect(t)
	stream := newStream(t, js, nil)
	if err := nc.Publish(stream+".raw", []byte("x")); err != nil {
		t.Fatal(err)
	}
	msgs := readStream(t, js, stream, 1, 10*time.Second)
	if _, err := outboxnats.Decode(msgs[0]); !errors.Is(err, outboxnats.ErrNoMessageID) {
		t.Fatalf("Decode: %v, want ErrNoMessageID", err)
	}
}

// durable creates an explicit-ack pull consumer on stream.
func durable(t *testing.T, js jetstream.JetStream, stream string) jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "inventory", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("create consumer on %s: %v", stream, err)
	}
	return c
}

// consume runs Consume in the background until the test ends, then
// checks it returned nil.
func consume(t *testing.T, c jetstream.Consumer, h func(context.Context, *inbox.Message) error) {
	t.Helper()
	relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error { return outboxnats.Consume(ctx, c, h, nil) })
}

// TestConsumeCloudEvents runs the consume suite on messages published
// with format=cloudevents.
func TestConsumeCloudEvents(t *testing.T) {
	t.Parallel()
	brokertest.RunConsume(t, brokertest.CloudEvents(target))
}
