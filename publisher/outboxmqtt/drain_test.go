package outboxmqtt_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
)

// TestDrainThroughput measures how fast one relay drains a backlog from
// PostgreSQL to the local Mosquitto, counted at a QoS 1 subscriber. It runs
// only with OUTBOX_DRAIN_BENCH=1 (OUTBOX_DRAIN_MESSAGES overrides the
// 100,000 messages) and logs messages per second; it asserts delivery, not
// speed.
//
//	OUTBOX_DRAIN_BENCH=1 go test -run TestDrainThroughput -v ./publisher/outboxmqtt/
func TestDrainThroughput(t *testing.T) {
	if os.Getenv("OUTBOX_DRAIN_BENCH") == "" {
		t.Skip("set OUTBOX_DRAIN_BENCH=1 to measure drain throughput")
	}
	total := 100_000
	if v := os.Getenv("OUTBOX_DRAIN_MESSAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("OUTBOX_DRAIN_MESSAGES=%q", v)
		}
		total = n
	}
	requireBroker(t)
	db := testdb.New(t, store.Postgres)
	prefix := "drain" + randomHex(4)
	sub := subscribe(t, brokerAddr, prefix+"/#")
	p := dial(t, brokerAddr, nil)

	enq := relaytest.NewEnqueuer(t, db)
	ctx := context.Background()
	payload := []byte(`{"order_id":42,"customer":"c-1234","amount_cents":129900,"currency":"EUR","items":3}`)
	for n := 0; n < total; n += 1000 {
		msgs := make([]outbox.Message, min(1000, total-n))
		for i := range msgs {
			msgs[i] = outbox.Message{Topic: prefix + ".order.created", Key: fmt.Sprint("order-", n+i), Payload: payload}
		}
		if _, err := enq.Enqueue(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("enqueued %d messages; draining", total)

	start := time.Now()
	relaytest.Start(t, db, relayConfig(p))
	relaytest.WaitFor(t, 30*time.Minute, "the backlog to drain", func() bool {
		return relaytest.Count(t, db, "sent") == total
	})
	drained := time.Since(start)
	relaytest.WaitFor(t, 5*time.Minute, "every message at the subscriber", func() bool { return sub.distinct() == total })
	received := time.Since(start)
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status <> 'sent'`); n != 0 {
		t.Fatalf("%d messages not sent", n)
	}
	t.Logf("drained %d messages PostgreSQL → Mosquitto (%s, QoS 1, in flight ≤ min(%d, the broker's Receive Maximum)) in %v: %.0f msg/s; all at the subscriber after %v",
		total, outboxmqtt.Topic(prefix+".order.created"), outboxmqtt.DefaultMaxInFlight, drained.Round(time.Millisecond),
		float64(total)/drained.Seconds(), received.Round(time.Millisecond))
}
