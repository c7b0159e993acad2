package outboxamqp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// target is the local RabbitMQ. A destination is a routing key on
// amq.topic with a fresh queue bound to it; the missing destination is a
// routing key no queue is bound to, which the broker returns as
// unroutable. (A missing exchange, the other way a destination can be
// missing, is TestMissingExchange.) The publisher reaches the broker
// through a fault proxy, so that its connection can be cut; the
// consumers connect directly.
func target(t *testing.T) *brokertest.Target {
	dialRabbit(t)
	proxy := faultproxy.Start(t, rabbitAddr(t))
	p := newPublisher(t, viaAddr(t, proxy.Addr()), nil)
	var mu sync.Mutex
	consumers := map[string]*consumer{}
	return &brokertest.Target{
		Target: publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				dest := testdb.RandomName("suite.")
				c := consume(t, outboxamqp.DefaultExchange, dest)
				mu.Lock()
				consumers[dest] = c
				mu.Unlock()
				return dest
			},
			MissingDestination: func(*testing.T) string { return testdb.RandomName("suite.unbound.") },
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				mu.Lock()
				c := consumers[dest]
				mu.Unlock()
				var out []publishertest.Received
				for _, d := range c.waitN(t, n, 20*time.Second) {
					checkDelivery(t, d, dest)
					out = append(out, received(d))
				}
				return out
			},
			Disconnect: proxy.Disconnect,
			Features:   publishertest.Features{Keys: true, ArbitraryHeaders: true, MissingDestinationIsPermanent: true},
		},
		Consume: func(t *testing.T, dest string, h brokertest.Handler) {
			ch, queue := bindQueue(t, outboxamqp.DefaultExchange, dest, false)
			runConsume(t, ch, queue, h)
		},
		PublishForeign: func(t *testing.T, dest string) {
			ch, err := dialRabbit(t).Channel()
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.PublishWithContext(t.Context(), outboxamqp.DefaultExchange, dest, true, false, amqp.Publishing{Body: []byte("foreign")}); err != nil {
				t.Fatal(err)
			}
		},
		BadDestinations: func(*testing.T) []brokertest.BadDestination {
			unbound := testdb.RandomName("suite.unroutable.")
			return []brokertest.BadDestination{{Topic: unbound,
				Says: []string{fmt.Sprintf(`unroutable: no queue bound to exchange "amq.topic" with routing key %q`, unbound)}}}
		},
		URL:    rabbitURL,
		Broker: brokertest.Features{KeepsOrder: true},
	}
}

// checkDelivery checks the properties the contract gives a message
// beyond what Received shows.
func checkDelivery(t *testing.T, d amqp.Delivery, dest string) {
	t.Helper()
	h := received(d).Headers
	if d.Exchange != outboxamqp.DefaultExchange || d.RoutingKey != dest {
		t.Errorf("message %s: exchange %q routing key %q; want amq.topic, %q", d.MessageId, d.Exchange, d.RoutingKey, dest)
	}
	if d.DeliveryMode != amqp.Persistent || d.ContentType != h[publisher.HeaderContentType] || d.Type != h[publisher.HeaderTopic] || d.AppId != outboxamqp.AppID || d.Timestamp.IsZero() {
		t.Errorf("message %s: delivery mode %d, content type %q, type %q, app id %q, timestamp %v", d.MessageId, d.DeliveryMode, d.ContentType, d.Type, d.AppId, d.Timestamp)
	}
	if _, ok := h["message-id"]; ok {
		t.Errorf("message %s: the id is repeated as a header: %v", d.MessageId, h)
	}
}

// TestSuites runs the conformance, consume and relay suites on the local RabbitMQ.
func TestSuites(t *testing.T) {
	brokertest.Run(t, target)
}

// TestCrashEndToEnd runs the crash test on the local RabbitMQ.
func TestCrashEndToEnd(t *testing.T) {
	brokertest.RunCrash(t, target)
}

// TestOutage runs the outage test with the broker unreachable (every
// connection cut and refused at a TCP proxy; the shared RabbitMQ itself
// keeps running).
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, brokertest.Outage{Name: "ProxyRefuses", Start: func(t *testing.T) *brokertest.OutageTarget {
		proxy := faultproxy.Start(t, rabbitAddr(t))
		topic := testdb.RandomName("outage.")
		c := consume(t, outboxamqp.DefaultExchange, topic)
		return &brokertest.OutageTarget{
			Publisher:   newPublisher(t, viaAddr(t, proxy.Addr()), &outboxamqp.Config{DialTimeout: 2 * time.Second}),
			Destination: topic,
			Arrivals: func(*testing.T) []publishertest.Received {
				var out []publishertest.Received
				for _, d := range c.deliveries() {
					out = append(out, received(d))
				}
				return out
			},
			Down:        func(*testing.T) { proxy.SetMode(faultproxy.Refuse) },
			Up:          func(*testing.T) { proxy.SetMode(faultproxy.Pass) },
			MaxAttempts: 3,
		}
	}})
}

// TestDecodeForeignDelivery: a delivery without message_id is not an
// outbox message.
func TestDecodeForeignDelivery(t *testing.T) {
	t.Parallel()
	if _, err := outboxamqp.Decode(amqp.Delivery{Body: []byte("foreign")}); !errors.Is(err, outboxamqp.ErrNoMessageID) {
		t.Errorf("Decode of a foreign delivery: %v, want ErrNoMessageID", err)
	}
}

// runConsume runs Consume until the test ends and checks it returned nil.
func runConsume(t *testing.T, ch *amqp.Channel, queue string, handler func(context.Context, *inbox.Message) error) {
	t.Helper()
	relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error {
		return outboxamqp.Consume(ctx, ch, queue, handler, &outboxamqp.ConsumeOptions{Logger: relaytest.Logger(), RetryDelay: 10 * time.Millisecond})
	})
}

// TestConsumeCloudEvents runs the consume suite on messages published
// with format=cloudevents.
func TestConsumeCloudEvents(t *testing.T) {
	t.Parallel()
	brokertest.RunConsume(t, brokertest.CloudEvents(target))
}
