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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// prepareBroker creates what the destination needs to accept the run's
// messages — the relay creates nothing on a broker — and returns the
// function that removes it again:
//
//   - nats://: a file-backed JetStream stream over the run's subjects;
//   - amqp://: a durable queue bound to the exchange for the run's topics,
//     so publishes are routed (they are mandatory) and confirmed on disk;
//   - redis://: the run's streams (the publisher never creates one);
//   - kafka://: the run's topics.
//
// Other destinations need nothing. The returned setup also counts the
// messages the broker holds for the run, where it can.
func prepareBroker(ctx context.Context, to, prefix, runID string, topics []string) (*brokerSetup, error) {
	none := &brokerSetup{remove: func() {}}
	u, err := url.Parse(to)
	if err != nil {
		return none, nil // openDestination already refused it
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch strings.ToLower(u.Scheme) {
	case "nats", "tls":
		return prepareJetStream(ctx, u, to, prefix, runID, topics)
	case "kafka":
		return prepareKafka(ctx, u, to, prefix, runID, topics)
	case "amqp", "amqps":
		return prepareRabbitMQ(ctx, u, to, prefix, runID, topics)
	case "redis", "rediss":
		return prepareRedis(ctx, u, to, prefix, runID, topics)
	}
	return none, nil
}

// prepareJetStream creates the run's JetStream stream over every subject of the run.
func prepareJetStream(ctx context.Context, u *url.URL, to, prefix, runID string, topics []string) (*brokerSetup, error) {
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
	return &brokerSetup{
		what: "JetStream stream " + name,
		remove: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = js.DeleteStream(ctx, name)
			nc.Close()
		},
		consume: func(ctx context.Context, handle func(headers func(string) string)) (func(), error) {
			c, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{})
			if err != nil {
				return nil, fmt.Errorf("consume JetStream stream %s: %w", name, err)
			}
			cc, err := c.Consume(func(m jetstream.Msg) {
				h := m.Headers()
				handle(func(k string) string {
					if v := h[k]; len(v) > 0 {
						return v[0]
					}
					return ""
				})
			})
			if err != nil {
				return nil, fmt.Errorf("consume JetStream stream %s: %w", name, err)
			}
			return cc.Stop, nil
		},
		held: func(ctx context.Context) (int64, error) {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return 0, err
			}
			info, err := s.Info(ctx)
			if err != nil {
				return 0, err
			}
			return int64(info.State.Msgs), nil
		},
	}, nil
}

// prepareKafka creates the run's Kafka topics.
func prepareKafka(ctx context.Context, u *url.URL, to, prefix, runID string, topics []string) (*brokerSetup, error) {
	// The relay creates no topic (an operator's decision on a real
	// cluster): the bench creates the run's, 8 partitions each, with
	// the cluster's default replication, and deletes them after.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(u.Host, ",")...))
	if err != nil {
		return nil, fmt.Errorf("create the run's Kafka topics: %w", err)
	}
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopics(ctx, 8, -1, nil, topics...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("create the run's Kafka topics: %w", err)
	}
	return &brokerSetup{
		what: "Kafka topics " + strings.Join(topics, ", "),
		remove: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = adm.DeleteTopics(ctx, topics...)
			cl.Close()
		},
	}, nil
}

// prepareRabbitMQ declares a queue bound to the run's routing keys.
func prepareRabbitMQ(ctx context.Context, u *url.URL, to, prefix, runID string, topics []string) (*brokerSetup, error) {
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
	queue := "outbox-bench-" + runID
	return &brokerSetup{
		what: "RabbitMQ queue " + queue,
		remove: func() {
			_, _ = ch.QueueDelete(queue, false, false, false)
			_ = conn.Close()
		},
		held: func(context.Context) (int64, error) {
			q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
			return int64(q.Messages), err
		},
	}, nil
}

// prepareRedis creates the run's streams.
func prepareRedis(ctx context.Context, u *url.URL, to, prefix, runID string, topics []string) (*brokerSetup, error) {
	opts, err := redis.ParseURL(to)
	if err != nil {
		return &brokerSetup{remove: func() {}}, nil
	}
	c := redis.NewClient(opts)
	for _, t := range topics {
		// A consumer group's MKSTREAM creates an empty stream.
		if err := c.XGroupCreateMkStream(ctx, t, "outbox-bench", "$").Err(); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("create Redis stream %s: %w", t, err)
		}
	}
	return &brokerSetup{
		what: "Redis streams " + strings.Join(topics, ", "),
		remove: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.Del(ctx, topics...).Err()
			_ = c.Close()
		},
		held: func(ctx context.Context) (int64, error) {
			var n int64
			for _, t := range topics {
				l, err := c.XLen(ctx, t).Result()
				if err != nil {
					return 0, err
				}
				n += l
			}
			return n, nil
		},
	}, nil
}

// brokerSetup is what prepareBroker created for a run.
type brokerSetup struct {
	// what names it, for the report: "JetStream stream OUTBOX_BENCH_…".
	what string
	// remove deletes it.
	remove func()
	// held counts the messages it holds; nil when the destination cannot
	// tell.
	held func(ctx context.Context) (int64, error)
	// consume attaches a consumer that calls handle with each message's
	// headers as it receives them, until stop; nil when the bench cannot
	// consume from the destination.
	consume func(ctx context.Context, handle func(headers func(string) string)) (stop func(), err error)
}
