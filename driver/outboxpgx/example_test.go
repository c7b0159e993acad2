package outboxpgx_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/internal/exampledb"
)

// A driver over the application's pgx pool; Producer.Enqueue then takes a
// pgx.Tx of that pool. (It needs a PostgreSQL server, so go test only
// compiles it; the outboxsql examples run the same calls on SQLite.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	drv, err := outboxpgx.New(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := outbox.Migrate(ctx, drv, nil); err != nil {
		log.Fatal(err)
	}
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE accounts SET plan = 'pro' WHERE id = $1", 7); err != nil {
			return err
		}
		_, err := producer.Enqueue(ctx, tx, outbox.Message{Topic: "account.upgraded", Key: "account-7", Payload: []byte(`{"id":7}`)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// The pipelined form: the business statement and the outbox insert are
// queued on one pgx.Batch and reach PostgreSQL in one round trip. The
// producer's wake-up follows the batch's results, as Enqueue's follows
// its insert. (The example runs on a fresh database; an application's
// pool comes from pgxpool.New, as in the example of New.)
func ExampleDriver_Batched() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE accounts (id bigint PRIMARY KEY, plan text NOT NULL); INSERT INTO accounts VALUES (7, 'free')"); err != nil {
		log.Fatal(err)
	}
	producer, err := outbox.NewProducer(drv.Batched(), nil)
	if err != nil {
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue("UPDATE accounts SET plan = 'pro' WHERE id = $1", 7)
		// Validated and queued; nothing is sent yet.
		if _, err := producer.Enqueue(ctx, batch, outbox.Message{Topic: "account.upgraded", Key: "account-7", Payload: []byte(`{"id":7}`)}); err != nil {
			return err
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		log.Fatal(err)
	}
	var plan, topic string
	if err := pool.QueryRow(ctx, "SELECT plan, (SELECT topic FROM outbox_messages) FROM accounts WHERE id = 7").Scan(&plan, &topic); err != nil {
		log.Fatal(err)
	}
	fmt.Println(plan, topic)
	// Output: pro account.upgraded
}

// Relays for the tenants of one database, each tenant's outbox in a schema
// of its own: with one SharedListener their drivers wait for signals over
// one LISTEN connection, and a tenant's producers wake only its relay.
func ExampleSharedListener() {
	ctx := context.Background()
	var listener outboxpgx.SharedListener
	for _, tenant := range []string{"acme", "globex"} {
		cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
		if err != nil {
			log.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = tenant
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			log.Fatal(err)
		}
		defer pool.Close()
		drv, err := outboxpgx.New(pool, &outboxpgx.Config{Listener: &listener})
		if err != nil {
			log.Fatal(err)
		}
		relay, err := outbox.NewRelay(drv, &outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "*", Publisher: outbox.PublisherFunc(func(context.Context, *outbox.Envelope) error { return nil })}}})
		if err != nil {
			log.Fatal(err)
		}
		go func() { _ = relay.Run(ctx) }()
	}
}
