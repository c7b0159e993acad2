package scenario_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// The Kafka scenarios run an in-process Kafka (kfake: the real protocol
// over TCP) with one topic, the chaos producers' message topic, so that
// relays publish to it without a route destination.
const (
	kafkaTopic      = "chaos.event"
	kafkaPartitions = 8
)

// startKfake starts a one-broker kfake cluster with opts and closes it at
// cleanup.
func startKfake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// readKafkaTopic records in rec every record of topic, from the start of
// each partition to its high watermark, in offset order: id from the
// message-id header, key from the record key. It returns how many records
// there were.
func readKafkaTopic(t *testing.T, addrs []string, topic string, rec *chaos.Recorder) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("high watermarks of %s: %v", topic, err)
	}
	end := map[int32]int64{}
	from := map[int32]kgo.Offset{}
	total := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			end[o.Partition] = o.Offset
			from[o.Partition] = kgo.NewOffset().AtStart()
			total += int(o.Offset)
		}
	})
	if total == 0 {
		return 0
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := map[int32]int64{}
	read := 0
	for done := false; !done; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records of %s within a minute", read, total, topic)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end[r.Partition] {
				return
			}
			id := ""
			for _, h := range r.Headers {
				if h.Key == outboxkafka.HeaderMessageID {
					id = string(h.Value)
				}
			}
			rec.Deliver(id, string(r.Key))
			next[r.Partition] = r.Offset + 1
			read++
		})
		done = true
		for p, e := range end {
			done = done && next[p] >= e
		}
	}
	return read
}

// TestChaosKafkaBrokerDown closes the Kafka cluster under a relay that is
// draining while a producer commits, keeps it down, and starts it again
// on the same port from the same data directory (kfake persists its
// topics and logs there, as a broker does on disk). While it is down no
// row may become sent; afterwards everything arrives, and every row
// marked sent is in the topic, including those confirmed just before the
// close.
func TestChaosKafkaBrokerDown(t *testing.T) {
	scale := chaosScale(t)
	dir := t.TempDir()
	k := startKfake(t, kfake.SeedTopics(kafkaPartitions, kafkaTopic), kfake.DataDir(dir))
	addr := k.ListenAddrs()[0]
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatal(err)
	}

	h := harness.New(t, chaosDrivers[0])
	rec := &chaos.Recorder{}
	const publishTimeout = 3 * time.Second
	// The publisher the outbox command builds for --to kafka://…
	pub, err := outboxurl.Open("kafka://"+addr, &outboxurl.Options{Timeout: publishTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	l := relayUnderLoad(t, h, rec, outbox.Route{Pattern: "*", Publisher: pub}, publishTimeout)

	k.Close()
	down := time.Now()
	// A publish the broker confirmed before it closed may still return.
	time.Sleep(publishTimeout + 100*time.Millisecond)
	before := l.confirmed()
	hold := time.Duration(3*scale) * time.Second // 30 s under make chaos
	time.Sleep(hold)
	after := l.confirmed()
	t.Logf("broker down: %d messages confirmed during %v", after-before, hold)
	if after != before {
		t.Errorf("the publisher confirmed %d messages while the broker was down", after-before)
	}
	k2 := startKfake(t, kfake.Ports(port), kfake.DataDir(dir))
	recovered := time.Now()
	outage := recovered.Sub(down)
	relaytest.WaitFor(t, 2*time.Minute, "deliveries flowing again after the restart", func() bool { return l.confirmed() > after+50 })
	if err := l.stopProducing(); err != nil {
		t.Fatalf("producer: %v", err)
	}
	relaytest.WaitFor(t, 3*time.Minute, "every row settled", func() bool { return relaytest.Count(t, h.DB, "pending") == 0 })
	drained := time.Now()
	l.stop()

	n := readKafkaTopic(t, k2.ListenAddrs(), kafkaTopic, rec)
	t.Logf("%d records in %s", n, kafkaTopic)
	res := chaosResult{scenario: "broker closed and restarted", broker: "Kafka (kfake)",
		faults: fmt.Sprintf("1 × %.1fs down, same port and data", outage.Seconds()), recovered: recovered, drained: drained}
	// The close cuts short at most one round per worker: each of those
	// messages may be in the topic once from before the close and once
	// more, sent again because its outcome was unknown.
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: outbox.DefaultWorkers * loadBatch}, time.Minute)
}
