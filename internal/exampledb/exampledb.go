// Package exampledb gives each runnable example of the outbox's packages
// a fresh PostgreSQL database, migrated for the outbox (and the inbox),
// with a pool and a driver over it. The examples need a PostgreSQL
// server: the one the environment variable OUTBOX_TEST_POSTGRES names, as
// for the project's tests (by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
package exampledb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxpgx"
)

// Open creates the database and returns a pool and a driver over it;
// cleanup closes the pool and drops the database. It ends the program
// with the reason when the server cannot be reached.
func Open() (*pgxpool.Pool, *outboxpgx.Driver, func()) {
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
