package outboxurl_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testnats"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxnats"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// TestOpenUnreachable: a destination that does not answer when it is
// opened (a refused port: a listener opened and closed) opens all the
// same, for every kind; its publishes fail as unavailable, the class that
// takes the relay's route down and charges nothing, and nothing printed
// holds a secret of the URL.
func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	dead := "127.0.0.1:" + strconv.Itoa(brokertest.FreePort(t))
	for _, tc := range []struct{ name, raw string }{
		{"nats", "nats://" + dead},
		{"nats credentials", "nats://alice:pw1secret@" + dead + "?connect_timeout=1s"},
		{"nats token", "nats://" + dead + "?token=tok1secret"},
		{"kafka", "kafka://" + dead},
		{"redis", "redis://:pw1secret@" + dead + "/0"},
		{"mqtt", "mqtt://alice:pw1secret@" + dead},
		{"amqp", "amqp://guest:pw1secret@" + dead + "/"},
		{"webhook", "http://" + dead + "/hooks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := &syncbuf.Buffer{}
			p, err := outboxurl.Open(tc.raw, &outboxurl.Options{Timeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatalf("Open(%s) with nothing listening: %v; want a publisher whose route goes down", outboxurl.Redact(tc.raw), err)
			}
			defer func() { _ = p.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			errs := p.Publish(ctx, []*publisher.Envelope{amqpEnvelope("order.created")})
			if len(errs) != 1 || errs[0] == nil {
				t.Fatalf("publish with nothing listening: %v", errs)
			}
			if c := publisher.Classify(errs[0]); c != publisher.ClassUnavailable {
				t.Errorf("publish with nothing listening: %v, class %s; want unavailable", errs[0], c)
			}
			for _, s := range []string{"pw1secret", "tok1secret"} {
				if strings.Contains(errs[0].Error(), s) || strings.Contains(logs.String(), s) {
					t.Errorf("a secret is printed: %v\n%s", errs[0], logs.String())
				}
			}
		})
	}
}

// TestOpenNATSServerLater: a NATS server that is down when the publisher
// opens is connected to in the background; once it is up, publishes go
// through with no new Open.
func TestOpenNATSServerLater(t *testing.T) {
	t.Parallel()
	srv := testnats.StartServer(t)
	_, js := brokertest.JetStream(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "later", Subjects: []string{"later.>"}}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	logs := &syncbuf.Buffer{}
	p := openAs[*outboxnats.Publisher](t, srv.URL()+"?reconnect_wait=100ms", &outboxurl.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	env := amqpEnvelope("order.created")
	env.Destination = "later.order.created"
	if errs := p.Publish(ctx, []*publisher.Envelope{env}); errs[0] == nil || publisher.Classify(errs[0]) != publisher.ClassUnavailable {
		t.Fatalf("publish while the server is down: %v, want unavailable", errs[0])
	}
	if !strings.Contains(logs.String(), "connecting in the background") {
		t.Errorf("no warning that NATS does not answer:\n%s", logs.String())
	}

	srv.Start(t)
	for {
		errs := p.Publish(ctx, []*publisher.Envelope{env})
		if errs[0] == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("publish after the server came up: %v", errs[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
