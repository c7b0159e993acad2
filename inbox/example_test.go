package inbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/inbox"
)

// openExampleDB creates a fresh database, migrated for the outbox and the
// inbox, with a pool and a driver over it; cleanup closes the pool and
// drops the database. The examples need a PostgreSQL server: the one the
// environment variable OUTBOX_TEST_POSTGRES names, as for the project's
// tests (by default postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
func openExampleDB() (*pgxpool.Pool, *outboxpgx.Driver, func()) {
	ctx := context.Background()
	url := os.Getenv("OUTBOX_TEST_POSTGRES")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	server, err := pgx.ParseConfig(url)
	if err != nil {
		log.Fatal(err)
	}
	exec := func(stmt string) { // on the server's own database
		conn, err := pgx.ConnectConfig(ctx, server)
		if err != nil {
			log.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, stmt); err != nil {
			log.Fatal(err)
		}
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "outbox_example_" + hex.EncodeToString(b)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ConnConfig.Database = name
	exec("CREATE DATABASE " + name)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	drv, err := outboxpgx.New(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := outbox.Migrate(ctx, drv, nil); err != nil {
		log.Fatal(err)
	}
	return pool, drv, func() {
		pool.Close()
		exec("DROP DATABASE " + name + " WITH (FORCE)")
	}
}

// Handle applies a delivery's effect and records its message id in one
// transaction, so a redelivery of the same message changes nothing. The
// example runs on a fresh PostgreSQL database; outbox.Migrate creates the
// inbox's table.
func ExampleInbox_Handle() {
	pool, drv, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE stock (sku text PRIMARY KEY, reserved bigint NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO stock VALUES ('sku-1', 0)"); err != nil {
		log.Fatal(err)
	}

	ib, err := inbox.New(drv, &inbox.Config{Consumer: "inventory"})
	if err != nil {
		log.Fatal(err)
	}
	reserve := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE stock SET reserved = reserved + 1 WHERE sku = 'sku-1'")
		return err
	}
	const messageID = "0190a0a0-0000-7000-8000-00000000002a"
	for delivery := 1; delivery <= 2; delivery++ { // the broker delivers it twice
		applied, err := ib.Handle(ctx, messageID, reserve)
		if err != nil {
			log.Fatal(err) // do not acknowledge: the broker redelivers
		}
		fmt.Printf("delivery %d: applied %v\n", delivery, applied)
	}
	var reserved int
	if err := pool.QueryRow(ctx, "SELECT reserved FROM stock").Scan(&reserved); err != nil {
		log.Fatal(err)
	}
	fmt.Println("reserved:", reserved)
	// Output:
	// delivery 1: applied true
	// delivery 2: applied false
	// reserved: 1
}
