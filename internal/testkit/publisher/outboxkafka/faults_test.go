package outboxkafka_test

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txoutbox/outbox/internal/testkit/kafkatest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func envelope(topic, key, payload string) *publisher.Envelope {
	return publishertest.Envelope(topic, key, []byte(payload), "application/json", nil)
}

// notLeader makes c answer the next produce request (every one, if
// always) with NOT_LEADER_FOR_PARTITION, and counts the requests so
// answered.
func notLeader(c *kfake.Cluster, always bool) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		n.Add(1)
		if always {
			c.KeepControl()
		}
		return kafkatest.FailProduce(req, kerr.NotLeaderForPartition.Code), nil, true
	})
	return &n
}

// A leader change answered once is retried inside the client: the record
// is written once and the publish succeeds.
func TestNotLeaderOnceIsRetried(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	injected := notLeader(c, false)
	p := dial(t, c)
	env := envelope("orders", "order-1", `{"n":1}`)
	if errs := publishertest.Publish(t, p, 15*time.Second, env); errs[0] != nil {
		t.Fatalf("publish after one NOT_LEADER_FOR_PARTITION: %v", errs[0])
	}
	if injected.Load() != 1 {
		t.Fatalf("the fault was injected %d times, want 1", injected.Load())
	}
	recs := newConsumer(t, c.ListenAddrs(), "orders").readN(t, 1, 10*time.Second)
	if id := headers(recs[0])[outboxkafka.HeaderMessageID]; id != env.ID || len(recs) != 1 {
		t.Fatalf("got %d records, first id %q; want exactly %s", len(recs), id, env.ID)
	}
}

// A leader change that outlasts the client's patience surfaces as a
// retryable error, never as success and never as dead.
func TestNotLeaderThatPersistsIsRetryable(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	injected := notLeader(c, true)
	p := dial(t, c, kgo.RecordDeliveryTimeout(time.Second))
	errs := publishertest.Publish(t, p, 15*time.Second, envelope("orders", "k", `1`))
	if errs[0] == nil {
		t.Fatal("publish succeeded while every produce was refused")
	}
	if cls := publisher.Classify(errs[0]); cls != publisher.ClassTransient && cls != publisher.ClassUnknown {
		t.Fatalf("error %q is %v, want a retried class (transient or unknown)", errs[0], cls)
	}
	if injected.Load() < 2 {
		t.Fatalf("the broker refused %d produce requests; want the client to have retried", injected.Load())
	}
}

// A record the broker finds too large is dead at once, with the reason.
func TestMessageTooLargeIsPermanent(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		return kafkatest.FailProduce(req, kerr.MessageTooLarge.Code), nil, true
	})
	p := dial(t, c)
	errs := publishertest.Publish(t, p, 15*time.Second, envelope("orders", "k", `{"big":true}`))
	if cls := publisher.Classify(errs[0]); errs[0] == nil || cls != publisher.ClassPermanent {
		t.Fatalf("MESSAGE_TOO_LARGE from the broker gave %v (%v), want a permanent error", errs[0], cls)
	}
	if !strings.Contains(errs[0].Error(), "too large") {
		t.Errorf("error %q does not say why", errs[0])
	}
	// The next record goes through: the failure was the record's own.
	if errs := publishertest.Publish(t, p, 15*time.Second, envelope("orders", "k", `2`)); errs[0] != nil {
		t.Fatalf("publish after a too-large record: %v", errs[0])
	}
}

// A record over the client's batch limit never leaves: permanent too.
func TestRecordOverClientLimitIsPermanent(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	p := dial(t, c, kgo.ProducerBatchMaxBytes(64<<10))
	big := publishertest.Envelope("orders", "k", bytes.Repeat([]byte("x"), 100<<10), "text/plain", nil)
	small := envelope("orders", "other", `1`)
	errs := publishertest.Publish(t, p, 15*time.Second, big, small)
	if cls := publisher.Classify(errs[0]); errs[0] == nil || cls != publisher.ClassPermanent {
		t.Fatalf("100 KiB record over a 64 KiB limit gave %v (%v), want permanent", errs[0], cls)
	}
	if errs[1] != nil {
		t.Fatalf("the small record of the same batch failed: %v", errs[1])
	}
}

// A produce the broker never answers ends as an unknown outcome when the
// publish's context ends, never as success; and the record, which the
// broker did get, is indeed written later: unknown was the truth.
func TestUnansweredProduceIsUnknown(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	var swallowed atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		swallowed.Add(1)
		return nil, nil, true // read and never answered
	})
	p := dial(t, c, kgo.ProduceRequestTimeout(time.Second), kgo.RequestTimeoutOverhead(time.Second))
	env := envelope("orders", "k", `{"n":1}`)
	errs := publishertest.Publish(t, p, 1500*time.Millisecond, env)
	if errs[0] == nil {
		t.Fatal("an unanswered produce was reported delivered")
	}
	if cls := publisher.Classify(errs[0]); cls != publisher.ClassUnknown {
		t.Fatalf("unanswered produce gave %q (%v), want unknown", errs[0], cls)
	}
	if swallowed.Load() == 0 {
		t.Fatal("the produce request never reached the broker")
	}
	recs := newConsumer(t, c.ListenAddrs(), "orders").readN(t, 1, 20*time.Second)
	if headers(recs[0])[outboxkafka.HeaderMessageID] != env.ID {
		t.Fatalf("record %v, want message %s", headers(recs[0]), env.ID)
	}
}

// Publishing to a topic that does not exist is permanent and creates
// nothing.
func TestMissingTopicIsPermanentAndNotCreated(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	p := dial(t, c)
	errs := publishertest.Publish(t, p, 15*time.Second, envelope("no-such-topic", "k", `1`), envelope("orders", "k", `1`))
	if cls := publisher.Classify(errs[0]); errs[0] == nil || cls != publisher.ClassPermanent || !strings.Contains(errs[0].Error(), "does not exist") {
		t.Fatalf("missing topic gave %v (%v), want permanent 'does not exist'", errs[0], cls)
	}
	if errs[1] != nil {
		t.Fatalf("the record for an existing topic in the same batch failed: %v", errs[1])
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all topics
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range resp.Topics {
		if tp.Topic != nil && *tp.Topic == "no-such-topic" {
			t.Fatal("publishing created the missing topic")
		}
	}
}

// Brokers gone: the publish in flight ends as unavailable without waiting
// for its deadline, the next one without producing at all, and once a
// broker listens again on the same address the publisher resumes by
// itself.
func TestBrokerDownIsUnavailableAndRecovers(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	port := portOf(t, c)
	p := dial(t, c)
	if errs := publishertest.Publish(t, p, 15*time.Second, envelope("orders", "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	c.Close()
	for i := range 2 {
		errs := publishertest.Publish(t, p, time.Minute, envelope("orders", "k", fmt.Sprint(i+2)))
		if cls := publisher.Classify(errs[0]); cls != publisher.ClassUnavailable {
			t.Fatalf("publish %d with the broker down: %v (%v), want unavailable", i+1, errs[0], cls)
		}
	}
	c2 := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"), kfake.Ports(port))
	env := envelope("orders", "k", `{"after":"restart"}`)
	relaytest.WaitFor(t, 30*time.Second, "a publish to succeed after the restart", func() bool {
		return publishertest.Publish(t, p, 10*time.Second, env)[0] == nil
	})
	found := false
	for _, r := range newConsumer(t, c2.ListenAddrs(), "orders").readN(t, 1, 10*time.Second) {
		found = found || headers(r)[outboxkafka.HeaderMessageID] == env.ID
	}
	if !found {
		t.Fatal("the message confirmed after the restart is not in the new broker")
	}
}

func portOf(t testing.TB, c *kfake.Cluster) int {
	t.Helper()
	_, ps, err := net.SplitHostPort(c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Records with the same key go to one partition, in publish order.
func TestSameKeySamePartition(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(6, "orders"))
	p := dial(t, c)
	keys := []string{"order-1", "order-2", "order-3", "order-4", "order-5"}
	for seq := range 20 { // as the relay does: one message per key per batch
		var batch []*publisher.Envelope
		for _, k := range keys {
			batch = append(batch, envelope("orders", k, fmt.Sprintf(`{"seq":%d}`, seq)))
		}
		for i, err := range publishertest.Publish(t, p, 15*time.Second, batch...) {
			if err != nil {
				t.Fatalf("batch %d message %d: %v", seq, i, err)
			}
		}
	}
	recs := newConsumer(t, c.ListenAddrs(), "orders").readN(t, 100, 20*time.Second)
	partition := map[string]int32{}
	last := map[string]int{}
	used := map[int32]bool{}
	for _, r := range recs {
		k := string(r.Key)
		var seq int
		if _, err := fmt.Sscanf(string(r.Value), `{"seq":%d}`, &seq); err != nil {
			t.Fatal(err)
		}
		if p, ok := partition[k]; ok && p != r.Partition {
			t.Fatalf("key %s in partitions %d and %d", k, p, r.Partition)
		}
		if prev, ok := last[k]; ok && seq != prev+1 {
			t.Fatalf("key %s: seq %d after %d", k, seq, prev)
		}
		partition[k], last[k], used[r.Partition] = r.Partition, seq, true
	}
	if len(partition) != len(keys) || len(used) < 2 {
		t.Fatalf("keys %v over partitions %v: want all 5 keys, spread over more than one partition", partition, used)
	}
}
