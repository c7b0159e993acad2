package outboxkafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// newCluster starts an in-process Kafka (kfake: the real protocol, no
// disk) that creates no topic by itself, and closes it at cleanup.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// dial returns a publisher over c with Dial's client, closed at cleanup.
func dial(t testing.TB, c *kfake.Cluster, opts ...kgo.Opt) *outboxkafka.Publisher {
	t.Helper()
	p, err := outboxkafka.Dial(c.ListenAddrs(), nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// adminClient is an admin client on addrs, and the function that closes
// it.
func adminClient(t testing.TB, addrs []string) (*kadm.Client, func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	return kadm.NewClient(cl), cl.Close
}

// createTopic creates a topic the way an operator would.
func createTopic(t testing.TB, addrs []string, partitions int32, topic string) {
	t.Helper()
	adm, done := adminClient(t, addrs)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// consumer reads topics from their start with a plain kgo consumer.
type consumer struct {
	cl *kgo.Client
}

func newConsumer(t testing.TB, addrs []string, topics ...string) *consumer {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &consumer{cl: cl}
}

// poll returns the records fetched within d (at least one poll).
func (c *consumer) poll(t testing.TB, d time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	fs := c.cl.PollFetches(ctx)
	if fs.IsClientClosed() {
		return nil
	}
	fs.EachError(func(topic string, p int32, err error) {
		if ctx.Err() == nil {
			t.Logf("fetch %s/%d: %v", topic, p, err)
		}
	})
	return fs.Records()
}

// readN reads until n records arrived, failing after timeout.
func (c *consumer) readN(t testing.TB, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	deadline := time.Now().Add(timeout)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d records within %v", len(out), n, timeout)
		}
		out = append(out, c.poll(t, 500*time.Millisecond)...)
	}
	return out
}

func headers(r *kgo.Record) map[string]string {
	h := make(map[string]string, len(r.Headers))
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	return h
}

func received(r *kgo.Record) publishertest.Received {
	h := headers(r)
	return publishertest.Received{
		ID: h[outboxkafka.HeaderMessageID], Key: string(r.Key), Topic: h[publisher.HeaderTopic],
		Destination: r.Topic, Payload: r.Value, Headers: h,
	}
}
