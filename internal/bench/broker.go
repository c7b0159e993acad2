package bench

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
)

// prepareBroker creates what the destination needs to accept the run's
// messages — the relay creates nothing on a broker — and returns the
// function that removes it again:
//
//   - nats://: a file-backed JetStream stream over the run's subjects;
//   - amqp://: a durable queue bound to the exchange for the run's topics,
//     so publishes are routed (they are mandatory) and confirmed on disk;
//   - redis://: the run's streams (the publisher never creates one).
//
// Other destinations need nothing.
func prepareBroker(ctx context.Context, to, prefix, runID string, topics []string) (func(), error) {
	u, err := url.Parse(to)
	if err != nil {
		return func() {}, nil // openDestination already refused it
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch strings.ToLower(u.Scheme) {
	case "nats", "tls":
		nu := *u
		nu.RawQuery = ""
		nc, err := nats.Connect(nu.String())
		if err != nil {
			return nil, fmt.Errorf("create the run's JetStream stream: %w", err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, err
		}
		name := "OUTBOX_BENCH_" + runID
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ">"}, Storage: jetstream.FileStorage}); err != nil {
			nc.Close()
			return nil, fmt.Errorf("create JetStream stream %s: %w", name, err)
		}
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = js.DeleteStream(ctx, name)
			nc.Close()
		}, nil
	case "amqp", "amqps":
		exchange := u.Query().Get("exchange")
		if exchange == "" {
			exchange = "amq.topic"
		}
		nu := *u
		nu.RawQuery = ""
		conn, err := amqp.Dial(nu.String())
		if err != nil {
			return nil, fmt.Errorf("declare the run's RabbitMQ queue: %w", err)
		}
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDeclare("outbox-bench-"+runID, true, false, false, false, nil)
		}
		if err == nil {
			err = ch.QueueBind("outbox-bench-"+runID, prefix+"#", exchange, false, nil)
		}
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("declare the run's RabbitMQ queue: %w", err)
		}
		return func() {
			_, _ = ch.QueueDelete("outbox-bench-"+runID, false, false, false)
			_ = conn.Close()
		}, nil
	case "redis", "rediss":
		opts, err := redis.ParseURL(to)
		if err != nil {
			return func() {}, nil
		}
		c := redis.NewClient(opts)
		for _, t := range topics {
			// A consumer group's MKSTREAM creates an empty stream.
			if err := c.XGroupCreateMkStream(ctx, t, "outbox-bench", "$").Err(); err != nil {
				_ = c.Close()
				return nil, fmt.Errorf("create Redis stream %s: %w", t, err)
			}
		}
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.Del(ctx, topics...).Err()
			_ = c.Close()
		}, nil
	}
	return func() {}, nil
}
