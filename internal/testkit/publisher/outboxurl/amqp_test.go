package outboxurl_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
	"github.com/txoutbox/outbox/internal/testtls"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

var amqpTestURL = brokertest.AMQPURL

func openAMQP(t *testing.T, raw string, opts *outboxurl.Options) *outboxamqp.Publisher {
	t.Helper()
	return openAs[*outboxamqp.Publisher](t, raw, opts)
}

func amqpEnvelope(dest string) *publisher.Envelope {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	return &publisher.Envelope{ID: id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:], Topic: dest, Destination: dest,
		Payload: []byte(`{"n":1}`), Headers: map[string]string{publisher.HeaderTopic: dest, publisher.HeaderContentType: "application/json"}, Attempt: 1}
}

func TestOpenAMQP(t *testing.T) {
	t.Parallel()
	for raw, exchange := range map[string]string{
		"amqp://guest:guest@127.0.0.1:5672/":                                   "amq.topic",
		"AMQP://rabbit":                                                        "amq.topic",
		"amqp://app:pw@rabbit:5672/prod?exchange=events":                       "events",
		"amqp://rabbit/%2F?exchange=amq.direct&heartbeat=5&connect_timeout=2s": "amq.direct",
		"amqp://rabbit?heartbeat=30s&max_in_flight=10&name=billing":            "amq.topic",
		"amqps://app:pw@rabbit/prod?server_name=rabbit.internal":               "amq.topic",
		"amqp://rabbit?tls=true":                                               "amq.topic",
	} {
		if got := openAMQP(t, raw, nil).Exchange(); got != exchange {
			t.Errorf("Open(%q).Exchange() = %q, want %q", raw, got, exchange)
		}
	}
}

func TestOpenAMQPErrors(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"amqp:///vhost":                               "no host",
		"amqp://u:pw-secret@h/?exchnage=x":            `unknown parameter "exchnage"`,
		"amqp://u:pw-secret@h/?exchange=a&exchange=b": `"exchange" given 2 times`,
		"amqp://u:pw-secret@h/?exchange=":             "exchange= is empty",
		"amqp://u:pw-secret@h/?heartbeat=0":           "heartbeat",
		"amqp://u:pw-secret@h/?heartbeat=soon":        "heartbeat",
		"amqp://u:pw-secret@h/?connect_timeout=-1s":   "connect_timeout",
		"amqp://u:pw-secret@h/?max_in_flight=0":       "max_in_flight",
		"amqp://u:pw-secret@h/?tls=maybe":             "tls",
		"amqp://u:pw-secret@h/?ca_file=/nonexistent":  "ca_file",
		"amqp://u:pw-secret@h/?cert_file=/x.pem":      "cert_file and key_file go together",
		"amqps://u:pw-secret@h:99999/":                "bad port",
		"amqp://u:pw-secret@h/a/b":                    "one path segment",
		"amqp://u:pw-secret@h/#frag":                  "fragment",
	} {
		openFails(t, raw, nil, []string{want}, "pw-secret")
	}
}

// TestOpenAMQPPublishes publishes through an opened URL to the local
// RabbitMQ, to the exchange the URL names.
func TestOpenAMQPPublishes(t *testing.T) {
	t.Parallel()
	conn, err := amqp.Dial(amqpTestURL)
	if err != nil {
		testdb.Unavailable(t, "RabbitMQ", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	dest := "outboxurl." + q.Name[len(q.Name)-8:]
	if err := ch.QueueBind(q.Name, dest, "amq.direct", false, nil); err != nil {
		t.Fatal(err)
	}
	p := openAMQP(t, amqpTestURL+"?exchange=amq.direct&name=outboxurl-test", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	env := amqpEnvelope(dest)
	if err := p.Publish(ctx, []*publisher.Envelope{env})[0]; err != nil {
		t.Fatal(err)
	}
	var d amqp.Delivery
	var ok bool
	for d, ok, err = ch.Get(q.Name, true); err == nil && !ok && ctx.Err() == nil; d, ok, err = ch.Get(q.Name, true) {
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || !ok || d.MessageId != env.ID || d.Exchange != "amq.direct" {
		t.Fatalf("get: %v %v: message %q from %q", err, ok, d.MessageId, d.Exchange)
	}

	missing := openAMQP(t, amqpTestURL+"?exchange=outboxurl-no-such-exchange", nil)
	err = missing.Publish(ctx, []*publisher.Envelope{amqpEnvelope(dest)})[0]
	if !errors.Is(err, outboxamqp.ErrNoExchange) || publisher.Classify(err) != publisher.ClassPermanent {
		t.Fatalf("publish to a missing exchange: %v", err)
	}
}

// TestOpenAMQPTLS: amqps:// verifies the server's certificate against the
// system roots or ca_file, never skipping verification.
func TestOpenAMQPTLS(t *testing.T) {
	t.Parallel()
	ca := testtls.NewCA(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "server", "127.0.0.1").TLS}})
	if err != nil {
		t.Fatal(err)
	}
	testserver.Serve(t, ln, func(c net.Conn) {
		_ = c.(*tls.Conn).Handshake() // then hang up: not a broker
		_ = c.Close()
	})
	caFile := ca.File
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	publish := func(raw string) error {
		p := openAMQP(t, raw, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return p.Publish(ctx, []*publisher.Envelope{amqpEnvelope("tls.test")})[0]
	}

	err = publish("amqps://guest:tls-secret@127.0.0.1:" + port + "/?connect_timeout=3s")
	if publisher.Classify(err) != publisher.ClassUnavailable || !strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), "tls-secret") {
		t.Errorf("untrusted server certificate: %v; want an unavailable certificate error without the password", err)
	}
	err = publish("amqps://guest:tls-secret@127.0.0.1:" + port + "/?connect_timeout=3s&ca_file=" + caFile)
	if publisher.Classify(err) != publisher.ClassUnavailable || strings.Contains(err.Error(), "certificate") {
		t.Errorf("trusted server certificate: %v; want the TLS handshake to pass and the AMQP one to fail", err)
	}
	err = publish("amqp://guest:tls-secret@127.0.0.1:" + port + "/?connect_timeout=3s&ca_file=" + caFile + "&server_name=other.example")
	if publisher.Classify(err) != publisher.ClassUnavailable || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("certificate for another name: %v; want a certificate error", err)
	}
}

// FuzzOpenAMQP: Open never panics on an amqp URL, its errors are one
// line, and the password never shows in them.
func FuzzOpenAMQP(f *testing.F) {
	for _, s := range []string{
		"rabbit:5672/vhost?exchange=events",
		"rabbit/%2F?heartbeat=5&connect_timeout=2s&max_in_flight=10",
		"rabbit?ca_file=/nonexistent&server_name=x",
		"[::1]:5672/a/b?exchange=&x=1#frag",
		"@@rabbit:99999/%zz?heartbeat=-1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		for _, scheme := range []string{"amqp://", "amqps://"} {
			p, err := outboxurl.Open(scheme+"user:pw-zz-secret@"+rest, nil)
			if err == nil {
				_ = p.Close()
				continue
			}
			if msg := err.Error(); strings.Contains(msg, "pw-zz-secret") || strings.ContainsAny(msg, "\n") {
				t.Fatalf("error %q leaks the password or spans lines", msg)
			}
		}
	})
}
