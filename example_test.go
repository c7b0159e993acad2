package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxsql"
)

// openExampleDB opens a new SQLite database in a temporary directory,
// migrated for the outbox, with a driver over it. The examples run on it
// so that they need no server; PostgreSQL and MySQL work the same way.
func openExampleDB() (*sql.DB, *outboxsql.Driver, func()) {
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1) // SQLite has one writer: queue in the pool
	drv, err := outboxsql.New(db, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := outbox.Migrate(context.Background(), drv, nil); err != nil {
		log.Fatal(err)
	}
	return db, drv, func() {
		_ = db.Close()
		_ = os.RemoveAll(dir)
	}
}

// quietRelay is the relay configuration of the examples: routes, and no
// log lines.
func quietRelay(routes ...outbox.Route) *outbox.RelayConfig {
	return &outbox.RelayConfig{Routes: routes, Logger: slog.New(slog.DiscardHandler)}
}

// Enqueue writes a message in the same transaction as the business row it
// describes: both commit, or neither does.
func ExampleProducer_Enqueue() {
	db, drv, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES (?, ?)", 42, 1999); err != nil {
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
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	var topic, status string
	if err := db.QueryRowContext(ctx, "SELECT topic, status FROM outbox_messages").Scan(&topic, &status); err != nil {
		log.Fatal(err)
	}
	fmt.Println(topic, status)
	// Output: order.created pending
}

// A relay embedded in the application delivers to a function: the
// in-process destination. It marks each message sent once the function
// returned nil.
func ExampleNewRelay() {
	db, drv, cleanup := openExampleDB()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = drv.InTx(ctx, func(tx *sql.Tx) error {
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
	if err := db.QueryRow("SELECT status FROM outbox_messages").Scan(&status); err != nil {
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
	_, drv, cleanup := openExampleDB()
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
	err = drv.InTx(ctx, func(tx *sql.Tx) error {
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
