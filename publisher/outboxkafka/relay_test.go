package outboxkafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
)

// relayConfig routes every topic to p as relaytest.Config does, but
// bounds each publish to 5 s and backs off up to 500 ms.
func relayConfig(p outbox.Publisher) *outbox.RelayConfig {
	cfg := relaytest.Config(p)
	cfg.PublishTimeout = 5 * time.Second
	cfg.Retry.Cap = 500 * time.Millisecond
	return cfg
}

// seen collects the distinct message ids a consumer read.
type seen struct {
	mu   sync.Mutex
	ids  map[string]bool
	next map[int32]int64 // per partition, the offset after the last record read
}

func (s *seen) add(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids, s.next = map[string]bool{}, map[int32]int64{}
	}
	s.ids[headers(r)[outboxkafka.HeaderMessageID]] = true
	s.next[r.Partition] = max(s.next[r.Partition], r.Offset+1)
}

// caughtUp reports whether s read up to the end offsets.
func (s *seen) caughtUp(ends map[int32]int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, end := range ends {
		if s.next[p] < end {
			return false
		}
	}
	return true
}

func (s *seen) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

func (s *seen) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// consumeInto reads topic into s in the background until the returned
// function is called, which waits for the reader to stop.
func consumeInto(t *testing.T, c *consumer, s *seen) (stop func()) {
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
				s.add(r)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

// checkSettled waits for every enqueued message to be sent, none dead,
// and checks that every sent message arrived.
func checkSettled(t *testing.T, db *testdb.DB, want []string, arrived func(id string) bool) {
	t.Helper()
	relaytest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d messages marked sent", len(want)), func() bool {
		return relaytest.Count(t, db, "sent") == len(want)
	})
	if n := relaytest.Count(t, db, "dead"); n != 0 {
		t.Fatalf("%d messages dead", n)
	}
	for _, id := range relaytest.SentIDs(t, db) {
		if !arrived(id) {
			t.Fatalf("message %s is marked sent but never arrived", id)
		}
	}
}

func postgres(t *testing.T) *testdb.DB {
	t.Helper()
	return testdb.New(t, store.Postgres)
}

// holdOutage is how long the broker stays down in the outage tests.
const holdOutage = 10 * time.Second

// TestOutage stops the broker for ten seconds while a relay is draining a
// flow of messages from PostgreSQL, and starts it again on the same port:
// every message arrives, none is dead, and nothing marked sent is missing.
func TestOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		keep bool // the restarted broker keeps its data (a real restart)
	}{
		{"RestartWithData", true},
		{"RestartEmpty", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			outage(t, tc.keep)
		})
	}
}

func outage(t *testing.T, keep bool) {
	const topic, total = "order.created", 700
	db := postgres(t)
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, topic)}
	if keep {
		opts = append(opts, kfake.DataDir(t.TempDir()))
	}
	c1 := newCluster(t, opts...)
	port := portOf(t, c1)
	p := dial(t, c1)
	relaytest.Start(t, db, relayConfig(p))
	e := relaytest.NewEnqueuer(t, db)

	var before seen
	stop1 := consumeInto(t, newConsumer(t, c1.ListenAddrs(), topic), &before)
	flowDone := e.Flow(topic, total, 10, 25, 250*time.Millisecond)
	relaytest.WaitFor(t, 30*time.Second, "the first messages to arrive", func() bool { return before.len() >= 150 })

	if !keep {
		// The new broker starts empty: stop it accepting records, read
		// all it has, then take it down.
		blockProduce(c1)
		ends := endOffsets(t, c1, topic)
		relaytest.WaitFor(t, 20*time.Second, "the consumer to read everything the first broker holds", func() bool {
			return before.caughtUp(ends)
		})
	}
	stop1()
	c1.Close()
	down, atDown := time.Now(), len(e.IDs())
	time.Sleep(holdOutage)
	c2 := newCluster(t, append(opts, kfake.Ports(port))...)
	atUp := len(e.IDs())
	t.Logf("broker down for %v; %d messages read before, %d enqueued before, %d during the outage",
		time.Since(down).Round(time.Millisecond), before.len(), atDown, atUp-atDown)
	if atUp == atDown {
		t.Fatal("no message was enqueued during the outage")
	}
	if err := <-flowDone; err != nil {
		t.Fatalf("enqueue: %v", err)
	}

	var after seen
	consumeInto(t, newConsumer(t, c2.ListenAddrs(), topic), &after)
	want := e.IDs()
	arrived := func(id string) bool { return after.has(id) || before.has(id) }
	relaytest.WaitFor(t, 90*time.Second, fmt.Sprintf("all %d messages to arrive", total), func() bool {
		for _, id := range want {
			if !arrived(id) {
				return false
			}
		}
		return true
	})
	checkSettled(t, db, want, arrived)
	if keep {
		for id := range before.ids {
			if !after.has(id) {
				t.Fatalf("message %s read before the restart is gone after it: the broker did not keep its data", id)
			}
		}
	}
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
func endOffsets(t *testing.T, c *kfake.Cluster, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
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
