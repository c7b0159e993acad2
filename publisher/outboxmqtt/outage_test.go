package outboxmqtt_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// recorder counts the classes of a publisher's failures.
type recorder struct {
	outbox.Publisher
	unavailable, unknown, other atomic.Int32
}

func (r *recorder) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	errs := r.Publisher.Publish(ctx, batch)
	for _, err := range errs {
		switch {
		case err == nil:
		case outbox.Classify(err) == outbox.ClassUnavailable:
			r.unavailable.Add(1)
		case outbox.Classify(err) == outbox.ClassUnknown:
			r.unknown.Add(1)
		default:
			r.other.Add(1)
		}
	}
	return errs
}

// TestBrokerOutage stops the broker process (SIGKILL) for over 10 s while
// a real relay drains a flow of 600 messages from PostgreSQL, then starts
// it again on the same port. Every message reaches the subscriber, none
// goes dead, and the outage burns no attempts: a message counts at most
// the one attempt that was in flight when the broker died.
//
// The broker keeps nothing across the restart (persistence false), so the
// subscriber must be subscribed again before the relay may publish: with
// no subscriber MQTT acknowledges a message and drops it (PUBACK 0x10).
// The publisher therefore reaches the broker through a TCP proxy that
// stays shut until the subscriber is back; the subscriber connects
// directly.
func TestBrokerOutage(t *testing.T) {
	t.Parallel()
	const total, perTx, keys = 600, 5, 25
	m := startMosquitto(t, "")
	proxy, err := faultproxy.New(m.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	db := testdb.New(t, store.Postgres)
	prefix := "outage" + randomHex(4)
	sub := subscribe(t, m.addr, prefix+"/#")
	pub := &recorder{Publisher: dial(t, proxy.Addr(), nil)}
	relaytest.Start(t, db, relayConfig(pub))

	enq := relaytest.NewEnqueuer(t, db)
	produced := enq.Flow(prefix+".flow", total, perTx, keys, 125*time.Millisecond) // a steady flow for about 15 s

	relaytest.WaitFor(t, 60*time.Second, "150 messages before the outage", func() bool { return sub.distinct() >= 150 })
	connects := sub.connects.Load()
	m.kill()
	proxy.SetMode(faultproxy.Refuse)
	outage := time.Now()
	relaytest.WaitFor(t, 10*time.Second, "the relay to find the broker unavailable", func() bool { return pub.unavailable.Load() > 0 })
	t.Logf("broker down: %d messages enqueued, %d delivered", len(enq.IDs()), sub.distinct())
	time.Sleep(10*time.Second - time.Since(outage)) // hold the outage open for 10 s
	m.start()
	relaytest.WaitFor(t, 30*time.Second, "the subscriber to reconnect and subscribe again", func() bool {
		return sub.connects.Load() > connects && sub.subscribed.Load()
	})
	proxy.SetMode(faultproxy.Pass)

	if err := <-produced; err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	relaytest.WaitFor(t, 90*time.Second, fmt.Sprintf("all %d messages at the subscriber", total), func() bool { return sub.distinct() == total })
	relaytest.WaitFor(t, 30*time.Second, "every row to be marked sent", func() bool {
		return relaytest.Count(t, db, "sent") == total
	})
	if n := relaytest.Count(t, db, "dead"); n != 0 {
		t.Fatalf("%d messages dead after the outage", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE attempts > 2`); n != 0 {
		t.Errorf("%d messages counted more than one failed attempt: the outage burnt attempts", n)
	}
	// Per key, the first arrival of each message follows enqueue order.
	var order relaytest.KeyOrder
	for _, msg := range sub.messages() {
		order.Check(t, msg.ID, msg.Payload)
	}
	t.Logf("delivered %d distinct of %d arrivals; publish failures: %d unavailable, %d unknown, %d other",
		sub.distinct(), len(sub.messages()), pub.unavailable.Load(), pub.unknown.Load(), pub.other.Load())
	if pub.other.Load() != 0 {
		t.Errorf("%d failures were neither unavailable nor unknown", pub.other.Load())
	}
}
