package outboxpgx_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/internal/exampledb"
)

// InTx runs the business write and the Enqueue in one pgx.Tx. PostgreSQL
// errors come back translated: a duplicate row is
// driver.ErrUniqueViolation, and the rolled-back second signup enqueued
// nothing. (The example runs on a fresh database; an application's pool
// comes from pgxpool.New, as in the example of New.)
func ExampleDriver_InTx() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE users (email text PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	signUp := func(email string) error {
		return drv.InTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO users (email) VALUES ($1)", email); err != nil {
				return err
			}
			_, err := producer.Enqueue(ctx, tx, outbox.Message{Topic: "user.signed_up", Payload: []byte(`{"email":"` + email + `"}`)})
			return err
		})
	}
	for range 2 {
		switch err := signUp("ada@example.com"); {
		case errors.Is(err, driver.ErrUniqueViolation):
			fmt.Println("already a user")
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println("signed up")
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM outbox_messages").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "message enqueued")
	// Output:
	// signed up
	// already a user
	// 1 message enqueued
}

// Behind PgBouncer in transaction mode LISTEN cannot work, so the relay
// reads and settles through the pooler while RelayConfig.Listener takes
// one connection straight to the server for the producers' signals.
// (It needs a PostgreSQL server, so go test only compiles it.)
func ExampleNew_pgbouncer() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pooled, err := pgxpool.New(ctx, os.Getenv("PGBOUNCER_URL")) // e.g. port 6432
	if err != nil {
		log.Fatal(err)
	}
	defer pooled.Close()
	direct, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // the server itself
	if err != nil {
		log.Fatal(err)
	}
	defer direct.Close()

	drv, err := outboxpgx.New(pooled, nil)
	if err != nil {
		log.Fatal(err)
	}
	listener, err := outboxpgx.New(direct, nil)
	if err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(drv, &outbox.RelayConfig{
		Routes: []outbox.Route{{Pattern: "*", Publisher: outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
			log.Printf("%s %s", env.Topic, env.Payload)
			return nil
		})}},
		Listener: listener,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := relay.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
