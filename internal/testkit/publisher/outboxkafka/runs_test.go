package outboxkafka_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txoutbox/outbox/internal/testkit/kafkatest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// run is n envelopes of one key, payloads "0" … "n-1" padded to size.
func run(topic, key string, n, size int) []*publisher.Envelope {
	out := make([]*publisher.Envelope, n)
	for i := range out {
		body := fmt.Sprintf("%d", i)
		body += strings.Repeat(" ", max(size-len(body), 0))
		out[i] = publishertest.Envelope(topic, key, []byte(body), "text/plain", nil)
	}
	return out
}

// failThirdProduce has c refuse the third produce request it gets with a
// policy violation, an error the client does not retry.
func failThirdProduce(c *kfake.Cluster) {
	var produces atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if produces.Add(1) == 3 {
			return kafkatest.FailProduce(req, kerr.PolicyViolation.Code), nil, true
		}
		return nil, nil, false
	})
}

// TestRunInOneCall: Dial's Publisher publishes runs, and a key's run
// given in one call arrives whole and in order.
func TestRunInOneCall(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(4, "orders"))
	p := dial(t, c)
	if !p.PublishesRuns() {
		t.Fatal("Dial's Publisher does not publish runs")
	}
	batch := append(run("orders", "a", 300, 10), run("orders", "b", 100, 10)...)
	errs := publishertest.Publish(t, p, 15*time.Second, batch...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	got := map[string][]string{}
	for _, r := range newConsumer(t, c.ListenAddrs(), "orders").readN(t, len(batch), 20*time.Second) {
		got[string(r.Key)] = append(got[string(r.Key)], headers(r)["message-id"])
	}
	for _, key := range []string{"a", "b"} {
		var want []string
		for _, env := range batch {
			if env.Key == key {
				want = append(want, env.ID)
			}
		}
		if strings.Join(got[key], ",") != strings.Join(want, ",") {
			t.Fatalf("key %s: %d records, not the %d of the run in order", key, len(got[key]), len(want))
		}
	}
}

// TestRunFailureFailsTheRest: the broker fails one batch in the middle of
// a run (small batches, so the run takes several): the records before it
// are written, that one and every one after it fail, and none of those is
// in the topic.
func TestRunFailureFailsTheRest(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	failThirdProduce(c)
	p := dial(t, c, kgo.ProducerBatchMaxBytes(2048))
	batch := run("orders", "k", 120, 100)
	errs := publishertest.Publish(t, p, 15*time.Second, batch...)
	first := -1
	for i, err := range errs {
		switch {
		case err != nil && first < 0:
			first = i
		case err == nil && first >= 0:
			t.Fatalf("message %d confirmed after message %d failed: %v", i, first, errs[first])
		}
	}
	if first <= 0 {
		t.Fatalf("first failure at %d: want a failure in the middle of the run (the third produce request)", first)
	}
	if cls := publisher.Classify(errs[first]); cls == publisher.ClassPermanent {
		t.Fatalf("a broker's policy answer is %v, want it retried: %v", cls, errs[first])
	}
	recs := newConsumer(t, c.ListenAddrs(), "orders").readN(t, first, 20*time.Second)
	recs = append(recs, newConsumer(t, c.ListenAddrs(), "orders").poll(t, time.Second)...)
	seen := map[string]bool{}
	for _, r := range recs {
		seen[headers(r)["message-id"]] = true
	}
	for i, env := range batch {
		if seen[env.ID] != (i < first) {
			t.Fatalf("message %d in the topic: %v; want only the %d before the failure", i, seen[env.ID], first)
		}
	}
	// The retry, failed message first, goes through.
	if errs := publishertest.Publish(t, p, 15*time.Second, batch[first:]...); errs[0] != nil || errs[len(errs)-1] != nil {
		t.Fatalf("retry: %v … %v", errs[0], errs[len(errs)-1])
	}
}

// TestConcurrentRunsLongerThanABatch: calls made at once, each a run of
// its own key several batches long (small batches), while the broker
// fails one produce request in the middle: for every key, what was
// confirmed is the start of its run, nothing after its first failure is
// confirmed, and the topic holds exactly the confirmed records, in order.
func TestConcurrentRunsLongerThanABatch(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	failThirdProduce(c)
	p := dial(t, c, kgo.ProducerBatchMaxBytes(2048))
	keys := []string{"a", "b", "c", "d"}
	runs := make([][]*publisher.Envelope, len(keys))
	errs := make([][]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		runs[i] = run("orders", key, 120, 100)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = publishertest.Publish(t, p, 15*time.Second, runs[i]...)
		}()
	}
	wg.Wait()
	confirmed, failures := map[string][]string{}, 0
	for i, key := range keys {
		first := -1
		for j, err := range errs[i] {
			switch {
			case err != nil && first < 0:
				first = j
				failures++
			case err == nil && first >= 0:
				t.Fatalf("key %s: message %d confirmed after message %d failed: %v", key, j, first, errs[i][first])
			case err == nil:
				confirmed[key] = append(confirmed[key], runs[i][j].ID)
			}
		}
	}
	if failures == 0 {
		t.Fatal("no call saw the failed produce request")
	}
	total := 0
	for _, ids := range confirmed {
		total += len(ids)
	}
	got := map[string][]string{}
	cons := newConsumer(t, c.ListenAddrs(), "orders")
	for _, r := range append(cons.readN(t, total, 20*time.Second), cons.poll(t, time.Second)...) {
		got[string(r.Key)] = append(got[string(r.Key)], headers(r)["message-id"])
	}
	for _, key := range keys {
		if strings.Join(got[key], ",") != strings.Join(confirmed[key], ",") {
			t.Fatalf("key %s: the topic holds %d records, not the %d confirmed in order", key, len(got[key]), len(confirmed[key]))
		}
	}
}

// TestRunBatchesFitTheTopicLimit: a topic whose max.message.bytes is far
// below the client's default gets batches that fit it, so a run of small
// records is written whole; a record too large for the topic alone is
// permanent and does not hold back the rest of its key.
func TestRunBatchesFitTheTopicLimit(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(1))
	adm, done := adminClient(t, c.ListenAddrs())
	defer done()
	limit := "4096"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &limit}, "small"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	p := dial(t, c)
	batch := run("small", "k", 100, 300)
	big := publishertest.Envelope("small", "k", []byte(strings.Repeat("x", 5000)), "text/plain", nil)
	batch = append(batch[:50], append([]*publisher.Envelope{big}, batch[50:]...)...)
	errs := publishertest.Publish(t, p, 15*time.Second, batch...)
	for i, err := range errs {
		if i == 50 {
			if publisher.Classify(err) != publisher.ClassPermanent || !strings.Contains(err.Error(), "max.message.bytes") {
				t.Fatalf("a 5,000-byte record to a 4,096-byte topic: %v, want permanent naming the limit", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("message %d of 300 bytes: %v", i, err)
		}
	}
	if n := len(newConsumer(t, c.ListenAddrs(), "small").readN(t, 100, 20*time.Second)); n != 100 {
		t.Fatalf("%d records, want 100", n)
	}
}
