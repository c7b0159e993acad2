// Package shop is what the two example services share: the event one
// sends and the other reads, and how each starts up.
package shop

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox/driver/outboxpgx"
)

// OrderCreated is the body of an "order.created" message.
type OrderCreated struct {
	OrderID int64  `json:"order_id"`
	SKU     string `json:"sku"`
	Qty     int    `json:"qty"`
}

// Main runs run until SIGINT or SIGTERM; an error ends the process with
// exit code 1, prefixed by the service's name.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Open connects to $DATABASE_URL, runs the service's schema (idempotent
// DDL) and returns the pool with an outbox driver over it.
func Open(ctx context.Context, schema string) (*pgxpool.Pool, *outboxpgx.Driver, error) {
	pool, err := pgxpool.New(ctx, Env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"))
	if err != nil {
		return nil, nil, err
	}
	if _, err := pool.Exec(ctx, schema); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("create tables: %w", err)
	}
	drv, err := outboxpgx.New(pool, nil)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, drv, nil
}

// Env returns the environment variable name, or def when it is unset or
// empty.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
