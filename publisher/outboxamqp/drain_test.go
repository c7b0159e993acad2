package outboxamqp_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
)

// TestDrainThroughput measures how fast one relay drains a PostgreSQL
// backlog into RabbitMQ (to a durable queue, so every confirm waits for
// the broker's disk). It is a measurement, not a check, and runs only when
// asked:
//
//	OUTBOX_DRAIN_BENCH=1 go test -run TestDrainThroughput -v ./publisher/outboxamqp/
//
// OUTBOX_DRAIN_N sets the message count (default 100000);
// OUTBOX_DRAIN_TRANSIENT=1 binds a non-durable queue instead.
func TestDrainThroughput(t *testing.T) {
	if os.Getenv("OUTBOX_DRAIN_BENCH") == "" {
		t.Skip("a measurement: set OUTBOX_DRAIN_BENCH=1 to run it")
	}
	n := 100000
	if v := os.Getenv("OUTBOX_DRAIN_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	durable := os.Getenv("OUTBOX_DRAIN_TRANSIENT") == ""
	db := testdb.New(t, store.Postgres)
	topic := randomName("drain.")

	conn := dialRabbit(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	qname := randomName("outbox-drain-")
	if _, err := ch.QueueDeclare(qname, durable, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ch.QueueDelete(qname, false, false, false) })
	if err := ch.QueueBind(qname, topic, outboxamqp.DefaultExchange, false, nil); err != nil {
		t.Fatal(err)
	}

	enq := relaytest.NewEnqueuer(t, db)
	payload := []byte(`{"order_id":123456,"customer":"c-42","amount_cents":1999,"currency":"EUR"}`)
	for start := 0; start < n; start += 1000 {
		var msgs []outbox.Message
		for i := start; i < min(start+1000, n); i++ {
			msgs = append(msgs, outbox.Message{Topic: topic, Key: fmt.Sprint("customer-", i%10000), Payload: payload})
		}
		if _, err := enq.Enqueue(context.Background(), msgs); err != nil {
			t.Fatal(err)
		}
	}

	p := &timedPublisher{Publisher: newPublisher(t, rabbitURL, nil)}
	cfg := relayConfig(p)
	cfg.MaxPollInterval = 0
	var sent, rounds atomic.Int64
	cfg.OnBatch = func(r outbox.BatchReport) { sent.Add(int64(r.Sent)); rounds.Add(1) }
	begin := time.Now()
	relaytest.Start(t, db, cfg)
	relaytest.WaitFor(t, 10*time.Minute, "the backlog drained", func() bool { return sent.Load() >= int64(n) })
	elapsed := time.Since(begin)
	q, err := ch.QueueDeclarePassive(qname, durable, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	inPublish := time.Duration(p.busy.Load())
	t.Logf("drained %d messages in %v: %.0f msg/s (%d rounds, durable queue %v, %d messages in it); %v (%.0f%%) waiting for the broker in Publish, %.0f msg/s while publishing",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), rounds.Load(), durable, q.Messages,
		inPublish.Round(time.Millisecond), 100*inPublish.Seconds()/elapsed.Seconds(), float64(n)/inPublish.Seconds())
	if q.Messages < n {
		t.Errorf("the queue holds %d messages, want %d", q.Messages, n)
	}
}

// timedPublisher adds up the time spent in Publish, to tell the broker's
// share of a drain from the database's.
type timedPublisher struct {
	*outboxamqp.Publisher
	busy atomic.Int64
}

func (p *timedPublisher) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	start := time.Now()
	defer func() { p.busy.Add(int64(time.Since(start))) }()
	return p.Publisher.Publish(ctx, batch)
}
