package scenario_test

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
)

// TestChaosRabbitMQFaults is TestChaosDestinationFaults against RabbitMQ:
// the relay's AMQP connection goes through the fault proxy, and the
// deliveries are what a durable queue bound to the publisher's exchange
// holds at the end, in queue order. RabbitMQ does not dedupe, so every
// publish whose confirm was lost and that was sent again is a duplicate.
func TestChaosRabbitMQFaults(t *testing.T) {
	rabbitURL := brokertest.AMQPURL
	proxy, viaProxy := proxyURL(t, rabbitURL, outboxamqp.DefaultPort)
	shown := redact.URL(rabbitURL)
	direct, err := amqp.DialConfig(rabbitURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		testdb.Unavailable(t, "RabbitMQ at "+shown, err)
	}
	defer direct.Close()
	ch, err := direct.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	// A private durable queue, bound to the publisher's exchange with the
	// run's own routing key: nothing else publishes there. It is deleted at
	// the end, or by the broker an hour after its last use should the test
	// process die first.
	queue := testdb.RandomName("outboxchaos-")
	routingKey := "outboxchaos." + strings.TrimPrefix(queue, "outboxchaos-")
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-expires": int32(time.Hour / time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = ch.QueueDelete(queue, false, false, false) }()
	if err := ch.QueueBind(queue, routingKey, outboxamqp.DefaultExchange, false, nil); err != nil {
		t.Fatal(err)
	}

	// A stale connection is noticed within seconds (three missed
	// heartbeats), and a connection that cannot be made fails fast.
	pub, err := outboxamqp.New(viaProxy.String(), &outboxamqp.Config{DialTimeout: 2 * time.Second, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	h, rec, res := brokerFaults(t, proxy, pub, routingKey, "RabbitMQ")
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}

	// What the queue holds, in order, is what was delivered: every
	// publish the broker confirmed is in it (persistent messages, durable
	// queue), and so is every unconfirmed one that reached it.
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(1000, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(queue, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Read until the queue has been quiet for a while and at least as
	// many messages as it counted have arrived.
	read := 0
	for quiet := false; !quiet; {
		select {
		case d, ok := <-deliveries:
			if !ok {
				t.Fatalf("the channel closed after %d of the queue's %d messages", read, q.Messages)
			}
			key, _ := d.Headers[publisher.HeaderBusinessKey].(string)
			rec.Deliver(d.MessageId, key)
			read++
		case <-time.After(2 * time.Second):
			quiet = true
		}
	}
	if read < q.Messages {
		t.Fatalf("read %d of the queue's %d messages", read, q.Messages)
	}
	t.Logf("%d messages in the queue", read)
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: chaos.Unbounded}, time.Minute)
}
