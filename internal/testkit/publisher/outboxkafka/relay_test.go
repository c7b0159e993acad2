package outboxkafka_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestOutage runs the outage test on a one-broker cluster that is closed
// and started again on the same port, once keeping its data (a real
// restart; what was read before must still be there) and once empty
// (after the consumer has read all the first broker holds).
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, restart("RestartWithData", true), restart("RestartEmpty", false))
}

func restart(name string, keep bool) brokertest.Outage {
	return brokertest.Outage{Name: name, Start: func(t *testing.T) *brokertest.OutageTarget {
		const topic = "order.created"
		opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, topic)}
		if keep {
			opts = append(opts, kfake.DataDir(t.TempDir()))
		}
		c1 := newCluster(t, opts...)
		port := portOf(t, c1)
		var before, after arrivals
		stop1 := consumeInto(t, newConsumer(t, c1.ListenAddrs(), topic), &before)
		return &brokertest.OutageTarget{
			Publisher:   dial(t, c1),
			Destination: topic,
			Arrivals: func(*testing.T) []publishertest.Received {
				return append(before.all(), after.all()...)
			},
			Down: func(t *testing.T) {
				if !keep {
					// The new broker starts empty: stop it accepting
					// records, read all it has, then take it down.
					blockProduce(c1)
					ends := endOffsets(t, c1.ListenAddrs(), topic)
					relaytest.WaitFor(t, 20*time.Second, "the consumer to read everything the first broker holds", func() bool {
						return before.caughtUp(ends)
					})
				}
				stop1()
				c1.Close()
			},
			Up: func(t *testing.T) {
				c2 := newCluster(t, append(opts, kfake.Ports(port))...)
				consumeInto(t, newConsumer(t, c2.ListenAddrs(), topic), &after)
			},
			MaxAttempts: 3,
			// Produce requests refused while the first broker goes
			// down are transient failures.
			TransientFailures: !keep,
			Check: func(t *testing.T, _ []publishertest.Received) {
				if !keep {
					return
				}
				kept := idsOf(after.all())
				for _, r := range before.all() {
					if !kept[r.ID] {
						t.Fatalf("message %s read before the restart is gone after it: the broker did not keep its data", r.ID)
					}
				}
			},
		}
	}}
}

func idsOf(rs []publishertest.Received) map[string]bool {
	ids := map[string]bool{}
	for _, r := range rs {
		ids[r.ID] = true
	}
	return ids
}

// arrivals collects what a consumer read, in order.
type arrivals struct {
	mu   sync.Mutex
	got  []publishertest.Received
	next map[int32]int64 // per partition, the offset after the last record read
}

func (a *arrivals) add(r *kgo.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == nil {
		a.next = map[int32]int64{}
	}
	a.got = append(a.got, received(r))
	a.next[r.Partition] = max(a.next[r.Partition], r.Offset+1)
}

func (a *arrivals) all() []publishertest.Received {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]publishertest.Received(nil), a.got...)
}

// caughtUp reports whether a read up to the end offsets.
func (a *arrivals) caughtUp(ends map[int32]int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for p, end := range ends {
		if a.next[p] < end {
			return false
		}
	}
	return true
}

// consumeInto reads into a in the background until the returned function
// is called, which waits for the reader to stop.
func consumeInto(t *testing.T, c *consumer, a *arrivals) (stop func()) {
	t.Helper()
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			for _, r := range c.poll(t, 200*time.Millisecond) {
				a.add(r)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

// blockProduce makes c close every connection that sends a produce
// request, as a broker going down would; it counts the requests refused.
func blockProduce(c *kfake.Cluster) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		n.Add(1)
		c.KeepControl()
		return nil, errors.New("broker going down"), true
	})
	return &n
}

// endOffsets returns the end offset of each partition of topic.
func endOffsets(t *testing.T, addrs []string, topic string) map[int32]int64 {
	t.Helper()
	adm, done := adminClient(t, addrs)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	ends := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends
}
