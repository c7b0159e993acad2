// Command inventory is the consumer half of the outbox example: it reads
// "order.created" messages from NATS JetStream and reserves stock for
// each order exactly once, in its own PostgreSQL tables.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/inventory NATS_URL=nats://127.0.0.1:4222 go run ./examples/inventory
//
// The relay delivers at least once, so an order can arrive twice. The
// inbox records each message id in the same transaction as the stock
// update: a repeat finds the record and changes nothing. The inbox table
// must exist: run `outbox migrate --inbox-only --db $DATABASE_URL` first.
// See examples/README.md for the whole loop.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/examples/internal/shop"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher/outboxnats"
)

// schema is the service's own tables, with some stock to reserve. A real
// service would ship them as a migration.
const schema = `
CREATE TABLE IF NOT EXISTS stock (
	sku       TEXT PRIMARY KEY,
	available INTEGER NOT NULL CHECK (available >= 0),
	reserved  INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS reservations (
	order_id   BIGINT PRIMARY KEY,
	sku        TEXT NOT NULL,
	qty        INTEGER NOT NULL,
	status     TEXT NOT NULL, -- reserved or out_of_stock
	message_id TEXT NOT NULL
);
INSERT INTO stock (sku, available) VALUES ('sku-1', 100), ('sku-2', 100), ('sku-3', 5)
	ON CONFLICT (sku) DO NOTHING;
`

func main() { shop.Main("inventory", run) }

func run(ctx context.Context) error {
	pool, drv, err := shop.Open(ctx, schema)
	if err != nil {
		return err
	}
	defer pool.Close()
	ib, err := inbox.New(drv, &inbox.Config{Consumer: "inventory"})
	if err != nil {
		return err
	}

	nc, err := nats.Connect(shop.Env("NATS_URL", nats.DefaultURL), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// The stream and the durable consumer belong to the operator: the
	// relay creates none. The example makes them (idempotently) so that
	// it runs as is; start it before the relay, or create the stream with
	// the nats CLI (see examples/README.md).
	streamName, subject := shop.Env("STREAM", "ORDERS"), shop.Env("SUBJECT", "order.created")
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
		return fmt.Errorf("stream %s: %w", streamName, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, streamName, jetstream.ConsumerConfig{
		Durable:       "inventory",
		AckPolicy:     jetstream.AckExplicitPolicy,
		FilterSubject: subject,
	})
	if err != nil {
		return fmt.Errorf("consumer inventory on %s: %w", streamName, err)
	}
	slog.Info("inventory: consuming", "stream", streamName, "subject", subject)

	// Consume acks a message only after the handler returned nil; an
	// error naks it and JetStream delivers it again.
	return outboxnats.Consume(ctx, cons, func(ctx context.Context, m *inbox.Message) error {
		var order shop.OrderCreated
		if err := json.Unmarshal(m.Payload, &order); err != nil || order.OrderID == 0 {
			// Retrying cannot fix a bad body: log it and let it go.
			slog.Error("inventory: not an order", "message_id", m.ID, "payload", string(m.Payload))
			return nil
		}
		applied, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error {
			return reserve(ctx, tx, m.ID, order)
		})
		if err == nil {
			slog.Info("inventory: order", "order_id", order.OrderID, "sku", order.SKU, "qty", order.Qty, "first_delivery", applied)
		}
		return err
	}, nil)
}

// reserve takes qty of the order's SKU from available stock, or records
// that there was not enough. It runs in the inbox's transaction: it
// commits together with the record of the message id.
func reserve(ctx context.Context, tx pgx.Tx, messageID string, o shop.OrderCreated) error {
	tag, err := tx.Exec(ctx, `UPDATE stock SET available = available - $2, reserved = reserved + $2
		WHERE sku = $1 AND available >= $2`, o.SKU, o.Qty)
	if err != nil {
		return err
	}
	status := "reserved"
	if tag.RowsAffected() == 0 {
		status = "out_of_stock"
	}
	_, err = tx.Exec(ctx, `INSERT INTO reservations (order_id, sku, qty, status, message_id) VALUES ($1, $2, $3, $4, $5)`,
		o.OrderID, o.SKU, o.Qty, status, messageID)
	if err != nil {
		return fmt.Errorf("record reservation: %w", err)
	}
	return nil
}
