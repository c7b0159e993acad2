package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/exampledb"
	"github.com/txoutbox/outbox/seal"
)

// A transaction that rolls back takes its messages with it: an order that
// was never stored is never announced.
func ExampleProducer_Enqueue_rollback() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY, total bigint NOT NULL CHECK (total > 0))"); err != nil {
		log.Fatal(err)
	}
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}

	placeOrder := func(id, total int) error {
		return drv.InTx(ctx, func(tx pgx.Tx) error {
			_, err := producer.Enqueue(ctx, tx, outbox.Message{
				Topic:   "order.created",
				Key:     fmt.Sprintf("order-%d", id),
				Payload: fmt.Appendf(nil, `{"order_id":%d,"total":%d}`, id, total),
			})
			if err != nil {
				return err
			}
			// The business write fails after the message was written:
			// InTx rolls both back.
			_, err = tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", id, total)
			return err
		})
	}
	fmt.Println("order 1 stored:", placeOrder(1, 1999) == nil)
	fmt.Println("order 2 stored:", placeOrder(2, -5) == nil) // violates the CHECK

	rows, err := pool.Query(ctx, "SELECT business_key FROM outbox_messages ORDER BY id")
	if err != nil {
		log.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("messages:", keys)
	// Output:
	// order 1 stored: true
	// order 2 stored: false
	// messages: [order-1]
}

// EnqueueMany writes the events of one business operation together.
// Messages that share a key are delivered in slice order, so a consumer
// sees an order created before it sees it paid.
func ExampleProducer_EnqueueMany() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx := context.Background()
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}

	var ids []string
	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		ids, err = producer.EnqueueMany(ctx, tx, []outbox.Message{
			{Topic: "order.created", Key: "order-42", Payload: []byte(`{"order_id":42}`)},
			{Topic: "order.paid", Key: "order-42", Payload: []byte(`{"order_id":42,"amount":1999}`)},
			{Topic: "customer.updated", Key: "customer-7", Payload: []byte(`{"customer_id":7}`)},
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ids returned:", len(ids))

	rows, err := pool.Query(ctx, "SELECT topic, business_key FROM outbox_messages ORDER BY id")
	if err != nil {
		log.Fatal(err)
	}
	var topic, key string
	_, err = pgx.ForEachRow(rows, []any{&topic, &key}, func() error {
		fmt.Println(key, topic)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// ids returned: 3
	// order-42 order.created
	// order-42 order.paid
	// customer-7 customer.updated
}

// Enqueue checks every message before it writes anything: a
// *ValidationError names the message and the field, errors.Is matches the
// reason, and the transaction is still usable for the corrected message.
func ExampleValidationError() {
	_, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx := context.Background()
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}

	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		_, err := producer.EnqueueMany(ctx, tx, []outbox.Message{
			{Topic: "order.created", Payload: []byte(`{"order_id":42}`)},
			{Topic: "order created", Payload: []byte(`{"order_id":43}`)},
		})
		var ve *outbox.ValidationError
		if errors.As(err, &ve) {
			fmt.Println("message", ve.Index, "field", ve.Field)
		}
		fmt.Println("invalid topic:", errors.Is(err, outbox.ErrInvalidTopic))

		_, err = producer.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Payload: []byte(`{"order_id":`)})
		fmt.Println("invalid JSON:", errors.Is(err, outbox.ErrInvalidJSON))

		// Nothing was written; the same transaction goes on.
		_, err = producer.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Payload: []byte(`{"order_id":43}`)})
		return err
	})
	fmt.Println("committed:", err == nil)
	// Output:
	// message 1 field Topic
	// invalid topic: true
	// invalid JSON: true
	// committed: true
}

// A message with an ID of the caller's choosing (here derived from the
// request that caused it) is enqueued at most once: a retried request
// finds ErrDuplicateMessageID instead of announcing the order twice.
func ExampleErrDuplicateMessageID() {
	_, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx := context.Background()
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	const requestID = "0190a0a0-0000-7000-8000-000000000042" // a UUID
	handle := func() error {
		return drv.InTx(ctx, func(tx pgx.Tx) error {
			_, err := producer.Enqueue(ctx, tx, outbox.Message{
				ID:      requestID,
				Topic:   "order.created",
				Payload: []byte(`{"order_id":42}`),
			})
			return err
		})
	}
	fmt.Println("first:", handle())
	err = handle() // the client retried after a timeout
	fmt.Println("retry is a duplicate:", errors.Is(err, outbox.ErrDuplicateMessageID))
	// Output:
	// first: <nil>
	// retry is a duplicate: true
}

// With Config.Seal the payload is encrypted before it reaches the table,
// so the table, its replicas and backups never hold it in plain text; a
// relay holding the keys opens it on its way to the destination.
func ExampleSealConfig() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// In production the keys come from a key file (seal.OpenFileKeys) or
	// the environment (seal.KeysFromEnv); the secret here is fixed.
	keys, err := seal.NewStaticKeys(seal.Key{ID: "k1", Secret: bytes.Repeat([]byte{7}, seal.KeySize)})
	if err != nil {
		log.Fatal(err)
	}
	producer, err := outbox.NewProducer(drv, &outbox.Config{Seal: &outbox.SealConfig{Keys: keys}})
	if err != nil {
		log.Fatal(err)
	}
	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		_, err := producer.Enqueue(ctx, tx, outbox.Message{Topic: "customer.registered", Payload: []byte(`{"email":"ada@example.com"}`)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	var stored string
	if err := pool.QueryRow(ctx, "SELECT payload FROM outbox_messages").Scan(&stored); err != nil {
		log.Fatal(err)
	}
	fmt.Println("e-mail readable in the table:", strings.Contains(stored, "ada@"))

	deliver := outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
		fmt.Printf("delivered: %s\n", env.Payload)
		cancel()
		return nil
	})
	cfg := quietRelay(outbox.Route{Pattern: "*", Publisher: deliver}) // Sealed: "" opens it
	cfg.Keys = keys
	relay, err := outbox.NewRelay(drv, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := relay.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// e-mail readable in the table: false
	// delivered: {"email":"ada@example.com"}
}
