package outboxnats_test

import (
	"log"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/publisher/outboxnats"
)

// A relay that publishes order.* topics to JetStream over a connection
// the application configured. A stream capturing "order.>" must exist.
func Example() {
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.MaxReconnects(-1), nats.ReconnectBufSize(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4000))
	if err != nil {
		log.Fatal(err)
	}
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()

	var pool *pgxpool.Pool // the application's pool
	drv, err := outboxpgx.New(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(drv, &outbox.RelayConfig{
		Routes: []outbox.Route{{Pattern: "order.*", Publisher: pub}},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = relay // relay.Run(ctx) until shutdown
}
