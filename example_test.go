package outbox_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/exampledb"
)

// quietRelay is the relay configuration of the examples: routes, and no
// log lines.
func quietRelay(routes ...outbox.Route) *outbox.RelayConfig {
	return &outbox.RelayConfig{Routes: routes, Logger: slog.New(slog.DiscardHandler)}
}

// Enqueue writes a message in the same transaction as the business row it
// describes: both commit, or neither does.
func ExampleProducer_Enqueue() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY, total bigint NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op once committed
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", 42, 1999); err != nil {
		log.Fatal(err)
	}
	_, err = producer.Enqueue(ctx, tx, outbox.Message{
		Topic:   "order.created",
		Key:     "order-42",
		Payload: []byte(`{"order_id":42,"total":1999}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	var topic, status string
	if err := pool.QueryRow(ctx, "SELECT topic, status FROM outbox_messages").Scan(&topic, &status); err != nil {
		log.Fatal(err)
	}
	fmt.Println(topic, status)
	// Output: order.created pending
}

// A relay embedded in the application delivers to a function: the
// in-process destination. It marks each message sent once the function
// returned nil.
func ExampleNewRelay() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		_, err := producer.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Payload: []byte(`{"order_id":42}`)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	deliver := outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
		fmt.Printf("%s %s (attempt %d)\n", env.Topic, env.Payload, env.Attempt)
		cancel() // one message is all this example waits for
		return nil
	})
	relay, err := outbox.NewRelay(drv, quietRelay(outbox.Route{Pattern: "*", Publisher: deliver}))
	if err != nil {
		log.Fatal(err)
	}
	if err := relay.Run(ctx); err != nil { // until ctx is cancelled
		log.Fatal(err)
	}

	var status string
	if err := pool.QueryRow(context.Background(), "SELECT status FROM outbox_messages").Scan(&status); err != nil {
		log.Fatal(err)
	}
	fmt.Println(status)
	// Output:
	// order.created {"order_id":42} (attempt 1)
	// sent
}

// Routes send topics to destinations: the first pattern that matches wins
// ("*" matches one segment, ">" the rest, "*" alone anything), and
// Destination renames the topic on the way.
func ExampleRoute() {
	_, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	var got []string
	to := func(name string) outbox.Publisher {
		return outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%-15s → %s as %s", env.Topic, name, env.Destination))
			if len(got) == 3 {
				cancel()
			}
			return nil
		})
	}
	routes := []outbox.Route{
		{Pattern: "order.*", Publisher: to("orders")},
		{Pattern: "user.>", Publisher: to("users"), Destination: "crm"},
		{Pattern: "*", Publisher: to("everything else")},
	}

	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		_, err := producer.EnqueueMany(ctx, tx, []outbox.Message{
			{Topic: "order.created", Payload: []byte(`1`)},
			{Topic: "user.signed.up", Payload: []byte(`2`)},
			{Topic: "audit", Payload: []byte(`3`)},
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(drv, quietRelay(routes...))
	if err != nil {
		log.Fatal(err)
	}
	if err := relay.Run(ctx); err != nil {
		log.Fatal(err)
	}
	sort.Strings(got) // a batch is published concurrently
	for _, line := range got {
		fmt.Println(line)
	}
	// Output:
	// audit           → everything else as audit
	// order.created   → orders as order.created
	// user.signed.up  → users as crm
}
