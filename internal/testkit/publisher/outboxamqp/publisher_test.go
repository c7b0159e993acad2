package outboxamqp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func env(dest, key, payload string) *publisher.Envelope {
	return publishertest.Envelope(dest, key, []byte(payload), "application/json", nil)
}

// TestMixedBatch: in one pipelined batch, the messages the broker returns
// as unroutable fail permanently and the others succeed, each with its own
// result, although every one of them was acked.
func TestMixedBatch(t *testing.T) {
	t.Parallel()
	bound := testdb.RandomName("mixed.bound.")
	unbound := testdb.RandomName("mixed.unbound.")
	c := consume(t, outboxamqp.DefaultExchange, bound)
	p := newPublisher(t, rabbitURL, nil)
	var batch []*publisher.Envelope
	for i := range 40 {
		dest := bound
		if i%3 == 1 {
			dest = unbound
		}
		batch = append(batch, env(dest, fmt.Sprint("k", i), fmt.Sprintf(`{"i":%d}`, i)))
	}
	errs := p.Publish(publishCtx(t, 20*time.Second), batch)
	routed := 0
	for i, err := range errs {
		if batch[i].Destination == bound {
			routed++
			if err != nil {
				t.Errorf("message %d to a bound key: %v", i, err)
			}
			continue
		}
		publishertest.WantClass(t, fmt.Sprint("message ", i, " to an unbound key"), err, publisher.ClassPermanent)
		want := fmt.Sprintf(`unroutable: no queue bound to exchange "amq.topic" with routing key %q`, unbound)
		if !errors.Is(err, outboxamqp.ErrUnroutable) || !strings.Contains(err.Error(), want) {
			t.Errorf("message %d: error %q, want it to say %q", i, err, want)
		}
	}
	got := c.waitN(t, routed, 20*time.Second)
	for _, d := range got {
		if d.RoutingKey != bound {
			t.Errorf("delivery with routing key %q", d.RoutingKey)
		}
	}
}

// TestMissingExchange: a publisher configured with an exchange that does
// not exist fails every message permanently, naming the exchange; once the
// exchange exists, the same publisher delivers on a fresh channel.
func TestMissingExchange(t *testing.T) {
	t.Parallel()
	conn := dialRabbit(t)
	exchange := testdb.RandomName("outbox-test-missing-")
	p := newPublisher(t, rabbitURL, &outboxamqp.Config{Exchange: exchange})
	dest := testdb.RandomName("missing.")
	batch := []*publisher.Envelope{env(dest, "a", `1`), env(dest, "b", `2`), env(dest, "c", `3`)}
	for i, err := range p.Publish(publishCtx(t, 20*time.Second), batch) {
		publishertest.WantClass(t, fmt.Sprint("message ", i), err, publisher.ClassPermanent)
		if !errors.Is(err, outboxamqp.ErrNoExchange) || !strings.Contains(err.Error(), exchange) {
			t.Errorf("message %d: error %q does not say exchange %s does not exist", i, err, exchange)
		}
	}

	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.ExchangeDelete(exchange, false, false) })
	c := consume(t, exchange, dest)
	if errs := p.Publish(publishCtx(t, 20*time.Second), []*publisher.Envelope{env(dest, "a", `4`)}); errs[0] != nil {
		t.Fatalf("publish once the exchange exists: %v", errs[0])
	}
	if d := c.waitN(t, 1, 20*time.Second)[0]; d.Exchange != exchange || string(d.Body) != "4" {
		t.Fatalf("got %q from exchange %q", d.Body, d.Exchange)
	}
}

// TestNackIsTransient: a queue that rejects publishes when full nacks the
// overflow; those messages fail with a transient error, the first succeeds.
func TestNackIsTransient(t *testing.T) {
	t.Parallel()
	conn := dialRabbit(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	dest := testdb.RandomName("nack.")
	q, err := ch.QueueDeclare("", false, true, true, false, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, dest, outboxamqp.DefaultExchange, false, nil); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, rabbitURL, nil)
	errs := p.Publish(publishCtx(t, 20*time.Second), []*publisher.Envelope{env(dest, "a", `1`), env(dest, "b", `2`), env(dest, "c", `3`)})
	if errs[0] != nil {
		t.Fatalf("first message, into an empty queue: %v", errs[0])
	}
	for i := 1; i < 3; i++ {
		publishertest.WantClass(t, fmt.Sprint("message ", i, " into a full queue"), errs[i], publisher.ClassTransient)
		if !errors.Is(errs[i], outboxamqp.ErrNacked) {
			t.Errorf("message %d: %q is not ErrNacked", i, errs[i])
		}
	}
}

// TestUnreachableIsUnavailable: nothing listening means every message is
// Unavailable (the relay pauses the route), and the password stays out of
// the error.
func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := newPublisher(t, "amqp://guest:s3cr3t-pw@"+addr+"/", &outboxamqp.Config{DialTimeout: 2 * time.Second})
	for i, err := range p.Publish(publishCtx(t, 10*time.Second), []*publisher.Envelope{env("x.y", "a", `1`), env("x.y", "b", `2`)}) {
		publishertest.WantClass(t, fmt.Sprint("message ", i), err, publisher.ClassUnavailable)
		if strings.Contains(err.Error(), "s3cr3t-pw") || !strings.Contains(err.Error(), addr) {
			t.Errorf("error %q: want the address and no password", err)
		}
	}
}

// TestBadCredentialsAreUnavailable: a refused login is a connect failure,
// reported without the password.
func TestBadCredentialsAreUnavailable(t *testing.T) {
	t.Parallel()
	dialRabbit(t)
	p := newPublisher(t, "amqp://outbox-nobody:wr0ng-pw@"+rabbitAddr(t)+"/", nil)
	err := p.Publish(publishCtx(t, 20*time.Second), []*publisher.Envelope{env("x.y", "a", `1`)})[0]
	publishertest.WantClass(t, "publish with a bad password", err, publisher.ClassUnavailable)
	if strings.Contains(err.Error(), "wr0ng-pw") {
		t.Errorf("error %q leaks the password", err)
	}
}

// throughProxy is a fresh destination with a consumer, and a publisher
// whose connection goes through a fault proxy and has already delivered
// one message there.
func throughProxy(t *testing.T, prefix string) (*faultproxy.Proxy, string, *consumer, *outboxamqp.Publisher) {
	t.Helper()
	proxy := faultproxy.Start(t, rabbitAddr(t))
	dest := testdb.RandomName(prefix)
	c := consume(t, outboxamqp.DefaultExchange, dest)
	p := newPublisher(t, viaAddr(t, proxy.Addr()), &outboxamqp.Config{DialTimeout: 2 * time.Second})
	if err := p.Publish(publishCtx(t, 10*time.Second), []*publisher.Envelope{env(dest, "a", `0`)})[0]; err != nil {
		t.Fatal(err)
	}
	return proxy, dest, c, p
}

// TestReconnect: the connection is cut; while it cannot be re-established
// publishes are Unavailable (or, for what was in flight, Unknown); once
// the broker is reachable again the same publisher delivers.
func TestReconnect(t *testing.T) {
	t.Parallel()
	proxy, dest, c, p := throughProxy(t, "reconnect.")
	proxy.SetMode(faultproxy.Refuse)
	for i := range 3 {
		err := p.Publish(publishCtx(t, 10*time.Second), []*publisher.Envelope{env(dest, "a", `2`)})[0]
		if err == nil {
			t.Fatalf("publish %d succeeded while the broker was unreachable", i)
		}
		if cls := publisher.Classify(err); cls != publisher.ClassUnavailable && cls != publisher.ClassUnknown {
			t.Fatalf("publish %d while unreachable: %q is %v, want unavailable (or unknown)", i, err, cls)
		}
	}
	err := p.Publish(publishCtx(t, 10*time.Second), []*publisher.Envelope{env(dest, "a", `2`)})[0]
	publishertest.WantClass(t, "publish on a refused connection", err, publisher.ClassUnavailable)
	proxy.SetMode(faultproxy.Pass)
	last := env(dest, "a", `3`)
	if err := p.Publish(publishCtx(t, 10*time.Second), []*publisher.Envelope{last})[0]; err != nil {
		t.Fatalf("publish after the broker came back: %v", err)
	}
	relaytest.WaitFor(t, 20*time.Second, "the message sent after reconnecting", func() bool { return c.has(last.ID) })
}

// TestBlackhole: the broker stops answering (the connection stays open but
// nothing gets through). A publish in flight times out as Unknown, never
// success; reconnecting while it lasts fails; once traffic flows again the
// publisher recovers by itself.
func TestBlackhole(t *testing.T) {
	t.Parallel()
	proxy, dest, c, p := throughProxy(t, "blackhole.")

	proxy.SetMode(faultproxy.Blackhole)
	var batch []*publisher.Envelope
	for i := range 20 {
		batch = append(batch, env(dest, fmt.Sprint("k", i), fmt.Sprint(i+1)))
	}
	for i, err := range p.Publish(publishCtx(t, 2*time.Second), batch) {
		publishertest.WantClass(t, fmt.Sprint("blackholed message ", i), err, publisher.ClassUnknown)
	}
	// The connection was dropped; a new one cannot get through either.
	err := p.Publish(publishCtx(t, 5*time.Second), []*publisher.Envelope{env(dest, "a", `21`)})[0]
	if err == nil {
		t.Fatal("publish succeeded through a blackhole")
	}
	if cls := publisher.Classify(err); cls != publisher.ClassUnavailable && cls != publisher.ClassUnknown {
		t.Fatalf("publish through a blackhole: %q is %v", err, cls)
	}
	time.Sleep(time.Second) // hold the blackhole a little longer

	proxy.SetMode(faultproxy.Pass)
	last := env(dest, "a", `22`)
	relaytest.WaitFor(t, 30*time.Second, "a successful publish after the blackhole", func() bool {
		return p.Publish(publishCtx(t, 5*time.Second), []*publisher.Envelope{last})[0] == nil
	})
	relaytest.WaitFor(t, 20*time.Second, "the message published after recovery", func() bool { return c.has(last.ID) })
}

// TestMaxMessageBytes: a payload over Config.MaxMessageBytes fails
// permanently without being sent; the rest of the batch goes through.
func TestMaxMessageBytes(t *testing.T) {
	t.Parallel()
	dest := testdb.RandomName("size.")
	c := consume(t, outboxamqp.DefaultExchange, dest)
	p := newPublisher(t, rabbitURL, &outboxamqp.Config{MaxMessageBytes: 10})
	errs := p.Publish(publishCtx(t, 10*time.Second), []*publisher.Envelope{env(dest, "a", `"short"`), env(dest, "b", `"far too long"`)})
	if errs[0] != nil {
		t.Fatalf("small message: %v", errs[0])
	}
	publishertest.WantClass(t, "oversized message", errs[1], publisher.ClassPermanent)
	if !errors.Is(errs[1], outboxamqp.ErrTooLarge) {
		t.Errorf("%q is not ErrTooLarge", errs[1])
	}
	if got := c.waitN(t, 1, 10*time.Second); string(got[0].Body) != `"short"` {
		t.Fatalf("got %q", got[0].Body)
	}
}

// TestCloseDuringPublish: Close returns promptly even while a publish is
// stuck waiting for confirms that cannot come, the publish returns no
// success, and no goroutine is left (goleak checks at the end).
func TestCloseDuringPublish(t *testing.T) {
	t.Parallel()
	dialRabbit(t)
	proxy := faultproxy.Start(t, rabbitAddr(t))
	p, err := outboxamqp.New(viaAddr(t, proxy.Addr()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(publishCtx(t, 10*time.Second), []*publisher.Envelope{env("close.x", "a", `0`)})[0]; err == nil || publisher.Classify(err) != publisher.ClassPermanent {
		t.Fatalf("unbound key: %v, want unroutable", err)
	}
	proxy.SetMode(faultproxy.Blackhole)
	result := make(chan []error, 1)
	go func() {
		result <- p.Publish(context.Background(), []*publisher.Envelope{env("close.x", "a", `1`), env("close.x", "b", `2`)})
	}()
	// Give the publish time to get stuck; the assertions below hold even if
	// Close comes first.
	time.Sleep(200 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return")
	}
	for i, err := range <-result {
		if err == nil {
			t.Errorf("message %d reported delivered through a blackhole", i)
		}
	}
	if err := p.Publish(publishCtx(t, time.Second), []*publisher.Envelope{env("close.x", "a", `3`)})[0]; !errors.Is(err, outboxamqp.ErrClosed) {
		t.Fatalf("publish after Close: %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestConnectOption: Config.Connect supplies the connections (a caller's
// own amqp091-go configuration); the publisher uses and closes them.
func TestConnectOption(t *testing.T) {
	t.Parallel()
	dest := testdb.RandomName("connect.")
	c := consume(t, outboxamqp.DefaultExchange, dest)
	dials := 0
	p := newPublisher(t, "", &outboxamqp.Config{Connect: func(ctx context.Context) (*amqp.Connection, error) {
		dials++
		return amqp.DialConfig(rabbitURL, amqp.Config{Properties: amqp.Table{"connection_name": "caller's own"}})
	}})
	e := env(dest, "a", `1`)
	if err := p.Publish(publishCtx(t, 10*time.Second), []*publisher.Envelope{e})[0]; err != nil {
		t.Fatal(err)
	}
	if dials != 1 || c.waitN(t, 1, 10*time.Second)[0].MessageId != e.ID {
		t.Fatalf("dials = %d", dials)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		cfg  *outboxamqp.Config
		want string
	}{
		{"http://guest:pw-secret@h/", nil, "scheme must be amqp or amqps"},
		{"amqp:///vhost", nil, "has no host"},
		{"amqp://guest:pw-secret@h:99999/", nil, "bad port"},
		{"amqp://guest:pw-secret@h/a/b", nil, "one path segment"},
		{"amqp://guest:pw-secret@h/?exchange=x", nil, "no query parameters"},
		{"amqp://guest:pw-secret@h/", &outboxamqp.Config{MaxInFlight: -1}, "MaxInFlight"},
		{"amqp://guest:pw-secret@h/", &outboxamqp.Config{DialTimeout: -1}, "DialTimeout"},
		{"amqp://guest:pw-secret@h/", &outboxamqp.Config{Heartbeat: time.Millisecond}, "Heartbeat"},
		{"amqp://guest:pw-secret@h/", &outboxamqp.Config{MaxMessageBytes: -1}, "MaxMessageBytes"},
		{"amqp://guest:pw-secret@h/", &outboxamqp.Config{Exchange: strings.Repeat("x", 256)}, "Exchange"},
		{"", nil, "scheme must be amqp"},
	} {
		p, err := outboxamqp.New(tc.raw, tc.cfg)
		if err == nil {
			_ = p.Close()
			t.Errorf("New(%q) succeeded", tc.raw)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("New(%q) = %q, want %q and no password", tc.raw, err, tc.want)
		}
	}
	for _, raw := range []string{"amqp://h", "AMQPS://u:p@h:5671/%2F", "amqp://[::1]:5672/v"} {
		p, err := outboxamqp.New(raw, nil)
		if err != nil {
			t.Errorf("New(%q): %v", raw, err)
			continue
		}
		if p.Exchange() != outboxamqp.DefaultExchange {
			t.Errorf("New(%q).Exchange() = %q", raw, p.Exchange())
		}
		_ = p.Close()
	}
}
