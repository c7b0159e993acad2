package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/exampledb"
	"github.com/txoutbox/outbox/webhooksig"
)

// openConsumerDB opens the consumer's own database (a fresh one, see
// openExampleDB), migrated for the inbox, with a table the consumer's
// effects go to.
func openConsumerDB() (*pgxpool.Pool, *outboxpgx.Driver, func()) {
	pool, drv, cleanup := exampledb.Open()
	if _, err := pool.Exec(context.Background(), "CREATE TABLE shipments (order_id bigint NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	return pool, drv, cleanup
}

// shipments counts the rows the consumer's effect wrote.
func shipments(pool *pgxpool.Pool) int {
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM shipments").Scan(&n); err != nil {
		log.Fatal(err)
	}
	return n
}

// A consumer that already runs its own transaction claims the message id
// in it: the claim commits or rolls back with the effect.
func ExampleInbox_Claim() {
	pool, drv, cleanup := openConsumerDB()
	defer cleanup()
	ctx := context.Background()
	ib, err := inbox.New(drv, &inbox.Config{Consumer: "shipping"})
	if err != nil {
		log.Fatal(err)
	}

	consume := func(messageID string, orderID int) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }() // a no-op once committed
		first, err := ib.Claim(ctx, tx, messageID)
		if err != nil {
			return err
		}
		if !first {
			fmt.Println(messageID, "already handled; acknowledge it")
			return nil
		}
		if _, err := tx.Exec(ctx, "INSERT INTO shipments (order_id) VALUES ($1)", orderID); err != nil {
			return err
		}
		fmt.Println(messageID, "shipped order", orderID)
		return tx.Commit(ctx)
	}
	deliveries := []struct {
		messageID string
		orderID   int
	}{{"msg-1", 42}, {"msg-2", 43}, {"msg-1", 42}} // msg-1 arrives twice
	for _, d := range deliveries {
		if err := consume(d.messageID, d.orderID); err != nil {
			log.Fatal(err) // not acknowledged: the broker delivers it again
		}
	}
	fmt.Println("shipments:", shipments(pool))
	// Output:
	// msg-1 shipped order 42
	// msg-2 shipped order 43
	// msg-1 already handled; acknowledge it
	// shipments: 2
}

// When the effect fails, Handle records nothing: the consumer does not
// acknowledge, the broker delivers again, and that delivery applies it.
func ExampleInbox_Handle_retry() {
	pool, drv, cleanup := openConsumerDB()
	defer cleanup()
	ctx := context.Background()
	ib, err := inbox.New(drv, &inbox.Config{Consumer: "shipping"})
	if err != nil {
		log.Fatal(err)
	}

	carrierUp := false // the carrier's API is down at the first delivery
	ship := func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO shipments (order_id) VALUES (42)"); err != nil {
			return err
		}
		if !carrierUp {
			return errors.New("carrier API unavailable")
		}
		return nil
	}
	const messageID = "0190a0a0-0000-7000-8000-00000000002a"
	for delivery := 1; delivery <= 3; delivery++ {
		applied, err := ib.Handle(ctx, messageID, ship)
		fmt.Printf("delivery %d: applied %v, err %v\n", delivery, applied, err)
		carrierUp = true
	}
	fmt.Println("shipments:", shipments(pool))
	// Output:
	// delivery 1: applied false, err carrier API unavailable
	// delivery 2: applied true, err <nil>
	// delivery 3: applied false, err <nil>
	// shipments: 1
}

// WebhookHandler is a whole webhook consumer: it checks the relay's
// signature, then applies each message once however often it arrives.
func ExampleWebhookHandler() {
	pool, drv, cleanup := openConsumerDB()
	defer cleanup()
	ib, err := inbox.New(drv, &inbox.Config{Consumer: "shipping"})
	if err != nil {
		log.Fatal(err)
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // shared with the relay's webhook route
	handler, err := inbox.WebhookHandler(ib, &inbox.WebhookConfig{Secret: secret, Logger: slog.New(slog.DiscardHandler)},
		func(ctx context.Context, tx pgx.Tx, m *inbox.Message) error {
			_, err := tx.Exec(ctx, "INSERT INTO shipments (order_id) VALUES (($1::jsonb->>'order_id')::bigint)", string(m.Payload))
			return err
		})
	if err != nil {
		log.Fatal(err)
	}

	// deliver sends what the relay's webhook publisher sends.
	deliver := func(body string, sign bool) int {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/outbox", strings.NewReader(body))
		id, ts := "0190a0a0-0000-7000-8000-00000000002a", strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set(webhooksig.HeaderID, id)
		req.Header.Set(webhooksig.HeaderTimestamp, ts)
		req.Header.Set("outbox-topic", "order.paid")
		req.Header.Set("content-type", "application/json")
		sig := "v1,bm90IHRoZSBzaWduYXR1cmU="
		if sign {
			key, err := webhooksig.ParseSecret(secret)
			if err != nil {
				log.Fatal(err)
			}
			sig = webhooksig.Sign(key, id, ts, []byte(body))
		}
		req.Header.Set(webhooksig.HeaderSignature, sig)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println("forged:", deliver(`{"order_id":42}`, false))
	fmt.Println("first:", deliver(`{"order_id":42}`, true))
	fmt.Println("again:", deliver(`{"order_id":42}`, true)) // a retry after a lost answer
	fmt.Println("shipments:", shipments(pool))
	// Output:
	// forged: 401
	// first: 204
	// again: 204
	// shipments: 1
}

// DecodeHTTP reads a relay's webhook delivery into the message the
// producer enqueued, whichever wire format the route uses.
func ExampleDecodeHTTP() {
	h := http.Header{}
	h.Set("webhook-id", "0190a0a0-0000-7000-8000-00000000002a")
	h.Set("outbox-topic", "order.paid")
	h.Set("outbox-business-key", "order-42")
	h.Set("content-type", "application/json")
	m, err := inbox.DecodeHTTP(h, []byte(`{"order_id":42}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.ID)
	fmt.Println(m.Topic, m.Key, m.ContentType)
	fmt.Printf("%s\n", m.Payload)
	// Output:
	// 0190a0a0-0000-7000-8000-00000000002a
	// order.paid order-42 application/json
	// {"order_id":42}
}
