package outboxkafka_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// target is an in-process Kafka of three brokers that creates no topics
// by itself; a destination is a fresh topic of four partitions, read by a
// plain kgo consumer or by Consume in a consumer group of its own. The
// cluster keeps its data in a directory, so that cutting the connection
// can stop it and restoring it start it again on the same ports with the
// same topics and records, as a restart would (a kfake broker advertises
// its own address, so a proxy in front of it would be bypassed).
func target(t *testing.T) *brokertest.Target {
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
	return &brokertest.Target{
		Target: publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				topic := testdb.RandomName("suite-")
				createTopic(t, addrs, 4, topic)
				return topic
			},
			MissingDestination: func(*testing.T) string { return testdb.RandomName("missing-") },
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				var out []publishertest.Received
				for _, r := range newConsumer(t, addrs, dest).readN(t, n, 20*time.Second) {
					checkRecord(t, r)
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
		},
		Consume: func(t *testing.T, dest string, h brokertest.Handler) {
			runConsume(t, groupClient(t, addrs, dest), h)
		},
		PublishForeign: func(t *testing.T, dest string) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: dest, Value: []byte("not from the outbox")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		},
		Stored: func(t *testing.T, dest string) int {
			n := 0
			for _, end := range endOffsets(t, addrs, dest) {
				n += int(end)
			}
			return n
		},
		BadDestinations: func(*testing.T) []brokertest.BadDestination {
			missing := testdb.RandomName("missing-")
			return []brokertest.BadDestination{{Topic: missing, Says: []string{missing}}}
		},
		URL:    "kafka://" + strings.Join(addrs, ","),
		Broker: brokertest.Features{KeepsOrder: true},
	}
}

// checkRecord checks what the contract says of a record beyond what
// Received shows: the id is the first header, and a message without a key
// has no record key.
func checkRecord(t *testing.T, r *kgo.Record) {
	t.Helper()
	if len(r.Headers) == 0 || r.Headers[0].Key != outboxkafka.HeaderMessageID {
		t.Errorf("record at %s/%d@%d: first header is not %s: %v", r.Topic, r.Partition, r.Offset, outboxkafka.HeaderMessageID, r.Headers)
	}
	if _, keyed := headers(r)["outbox-business-key"]; !keyed && r.Key != nil {
		t.Errorf("record at %s/%d@%d of a message without a key has key %q", r.Topic, r.Partition, r.Offset, r.Key)
	}
}

// TestSuites runs the conformance, consume and relay suites on kfake.
func TestSuites(t *testing.T) {
	t.Parallel()
	brokertest.Run(t, target)
}

// TestCrashEndToEnd runs the crash test with the relay process reaching
// kfake over TCP.
func TestCrashEndToEnd(t *testing.T) {
	brokertest.RunCrash(t, target)
}

// TestDecodeForeignRecord: a record without the message-id header is
// not an outbox message.
func TestDecodeForeignRecord(t *testing.T) {
	t.Parallel()
	if _, err := outboxkafka.Decode(&kgo.Record{Topic: "t", Value: []byte("not from the outbox")}); !errors.Is(err, outboxkafka.ErrNoMessageID) {
		t.Errorf("Decode of a foreign record: %v, want ErrNoMessageID", err)
	}
}

// groupClient is a consumer-group client as Consume expects it: manual
// commits, reading from the start.
func groupClient(t *testing.T, addrs []string, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumerGroup(testdb.RandomName("group-")),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// runConsume runs Consume until the test ends and checks it returned nil.
func runConsume(t *testing.T, cl *kgo.Client, handler func(context.Context, *inbox.Message) error) {
	t.Helper()
	relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error {
		return outboxkafka.Consume(ctx, cl, handler, &outboxkafka.ConsumeOptions{Logger: relaytest.Logger(), RetryBackoff: 10 * time.Millisecond})
	})
}

// TestConsumeCloudEvents runs the consume suite on messages published
// with format=cloudevents.
func TestConsumeCloudEvents(t *testing.T) {
	t.Parallel()
	brokertest.RunConsume(t, brokertest.CloudEvents(target))
}
