package outboxamqp_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func TestMain(m *testing.M) {
	testdb.VerifyNoLeaks(m)
}

// rabbitURL is the local RabbitMQ the tests publish to.
var rabbitURL = brokertest.AMQPURL

// rabbitAddr is rabbitURL's host:port, for the fault proxy.
func rabbitAddr(t testing.TB) string {
	t.Helper()
	rest := rabbitURL[strings.Index(rabbitURL, "://")+3:]
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	if _, _, err := net.SplitHostPort(rest); err != nil {
		rest = net.JoinHostPort(rest, "5672")
	}
	return rest
}

// viaAddr is rabbitURL with its host:port replaced by addr.
func viaAddr(t testing.TB, addr string) string {
	t.Helper()
	return strings.Replace(rabbitURL, rabbitAddr(t), addr, 1)
}

// dialRabbit connects for the test's own use (consumers, declarations),
// failing in CI and skipping elsewhere when RabbitMQ is not there.
func dialRabbit(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.DialConfig(rabbitURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		testdb.Unavailable(t, "RabbitMQ at "+outboxamqpRedacted(), err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func outboxamqpRedacted() string {
	if i := strings.LastIndexByte(rabbitURL, '@'); i >= 0 {
		return "amqp://xxxxx" + rabbitURL[i:]
	}
	return rabbitURL
}

func newPublisher(t testing.TB, rawURL string, cfg *outboxamqp.Config) *outboxamqp.Publisher {
	t.Helper()
	p, err := outboxamqp.New(rawURL, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// consumer is a real AMQP consumer: a server-named, exclusive, auto-delete
// queue bound to an exchange, consumed with auto-ack.
type consumer struct {
	mu   sync.Mutex
	got  []amqp.Delivery
	ids  map[string]int
	ch   chan struct{}
	done chan struct{}
}

// bindQueue declares an exclusive queue (deleted with its last consumer
// if autoDelete) bound to exchange with bindingKey, and returns a channel
// of the same connection to consume it on, and its name.
func bindQueue(t testing.TB, exchange, bindingKey string, autoDelete bool) (*amqp.Channel, string) {
	t.Helper()
	conn := dialRabbit(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, autoDelete, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, bindingKey, exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	return ch, q.Name
}

// consume binds a fresh queue to exchange with bindingKey and collects
// what arrives until the test ends.
func consume(t testing.TB, exchange, bindingKey string) *consumer {
	t.Helper()
	ch, queue := bindQueue(t, exchange, bindingKey, true)
	deliveries, err := ch.Consume(queue, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &consumer{ids: map[string]int{}, ch: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for d := range deliveries {
			c.mu.Lock()
			c.got = append(c.got, d)
			c.ids[d.MessageId]++
			c.mu.Unlock()
			select {
			case c.ch <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ch.Close()
		<-c.done
	})
	return c
}

func (c *consumer) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id] > 0
}

func (c *consumer) deliveries() []amqp.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]amqp.Delivery(nil), c.got...)
}

// waitN waits until n deliveries arrived and returns them.
func (c *consumer) waitN(t testing.TB, n int, d time.Duration) []amqp.Delivery {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		if got := c.deliveries(); len(got) >= n {
			return got
		}
		select {
		case <-c.ch:
		case <-deadline.C:
			t.Fatalf("received %d of %d messages within %v", len(c.deliveries()), n, d)
		}
	}
}

// received converts a delivery the way the conformance suite sees it:
// the id from the message_id property, the key from the
// outbox-business-key header, every header as a string.
func received(d amqp.Delivery) publishertest.Received {
	h := map[string]string{}
	for k, v := range d.Headers {
		if s, ok := v.(string); ok {
			h[k] = s
		}
	}
	return publishertest.Received{
		ID:          d.MessageId,
		Key:         h[publisher.HeaderBusinessKey],
		Topic:       h[publisher.HeaderTopic],
		Destination: d.RoutingKey,
		Payload:     d.Body,
		Headers:     h,
	}
}

func publishCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
