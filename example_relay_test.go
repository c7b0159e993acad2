package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/exampledb"
	"github.com/txoutbox/outbox/publisher"
)

// memoryDestination stands in for a broker: it keeps what it is given.
type memoryDestination struct {
	mu  sync.Mutex
	got []string
}

// Publish records the envelope as "destination payload"; returning nil
// confirms it, and the relay marks the message sent.
func (d *memoryDestination) Publish(_ context.Context, env *outbox.Envelope) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, env.Destination+" "+string(env.Payload))
	return nil
}

// Sorted returns what the destination got, sorted: a relay publishes a
// batch's messages of different keys concurrently.
func (d *memoryDestination) Sorted() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(slices.Values(d.got))
}

// waitFor polls cond until it holds, or gives up after ten seconds.
func waitFor(what string, cond func() bool) {
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatalf("timed out waiting for %s", what)
		}
	}
}

// countStatus counts the outbox messages in status.
func countStatus(pool *pgxpool.Pool, status string) int {
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM outbox_messages WHERE status = $1", status).Scan(&n); err != nil {
		log.Fatal(err)
	}
	return n
}

// A relay runs beside the application until its context is cancelled,
// delivering through the first route whose pattern matches each topic.
// Here the destination is in memory; the example waits until the table
// says every message is sent, then stops the relay, which hands its
// partitions back so that another relay takes over at once.
func ExampleRelay_Run() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dest := &memoryDestination{}
	relay, err := outbox.NewRelay(drv, quietRelay(
		outbox.Route{Pattern: "invoice.>", Publisher: outbox.PublisherFunc(dest.Publish), Destination: "billing"},
		outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(dest.Publish)},
	))
	if err != nil {
		log.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- relay.Run(ctx) }()

	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		_, err := producer.EnqueueMany(ctx, tx, []outbox.Message{
			{Topic: "order.created", Key: "order-42", Payload: []byte(`{"order_id":42}`)},
			{Topic: "invoice.issued", Key: "invoice-9", Payload: []byte(`{"invoice_id":9}`)},
			{Topic: "invoice.paid", Key: "invoice-10", Payload: []byte(`{"invoice_id":10}`)},
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	waitFor("three messages sent", func() bool { return countStatus(pool, "sent") == 3 })
	cancel()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	for _, line := range dest.Sorted() {
		fmt.Println(line)
	}
	// Output:
	// billing {"invoice_id":10}
	// billing {"invoice_id":9}
	// order.created {"order_id":42}
}

// The envelope a publisher gets carries the message's own headers (names
// in lower case) and the outbox's: its topic, business key and content
// type, which the broker adapters put on the wire.
func ExampleEnvelope() {
	_, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		_, err := producer.Enqueue(ctx, tx, outbox.Message{
			Topic:       "report.ready",
			Key:         "tenant-acme",
			ContentType: "text/csv",
			Payload:     []byte("month,total\n2024-05,1999\n"),
			Headers:     map[string]string{"X-Tenant": "acme"},
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	show := outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
		for _, name := range slices.Sorted(maps.Keys(env.Headers)) {
			fmt.Printf("%s: %s\n", name, env.Headers[name])
		}
		fmt.Printf("%q\n", env.Payload)
		cancel()
		return nil
	})
	relay, err := outbox.NewRelay(drv, quietRelay(outbox.Route{Pattern: "*", Publisher: show}))
	if err != nil {
		log.Fatal(err)
	}
	if err := relay.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// content-type: text/csv
	// outbox-business-key: tenant-acme
	// outbox-topic: report.ready
	// x-tenant: acme
	// "month,total\n2024-05,1999\n"
}

// A consumer that can reach the producer's database records that it has
// processed a message, so that operators see delivered but unprocessed
// messages apart. Only a message the relay confirmed sent can be marked.
func ExampleMarkConsumed() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx := context.Background()
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	var id string
	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		id, err = producer.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Payload: []byte(`{"order_id":42}`)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	err = outbox.MarkConsumed(ctx, drv, id)
	fmt.Println("before delivery, not sent:", errors.Is(err, outbox.ErrNotSent))

	dest := &memoryDestination{}
	relay, err := outbox.NewRelay(drv, quietRelay(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(dest.Publish)}))
	if err != nil {
		log.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	stopped := make(chan error, 1)
	go func() { stopped <- relay.Run(relayCtx) }()
	waitFor("the message sent", func() bool { return countStatus(pool, "sent") == 1 })
	stopRelay()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}

	// The consumer processed it.
	if err := outbox.MarkConsumed(ctx, drv, id); err != nil {
		log.Fatal(err)
	}
	fmt.Println("consumed:", countStatus(pool, "consumed"))
	err = outbox.MarkConsumed(ctx, drv, "0190a0a0-0000-7000-8000-000000000000")
	fmt.Println("unknown id, not found:", errors.Is(err, outbox.ErrNotFound))
	// Output:
	// before delivery, not sent: true
	// consumed: 1
	// unknown id, not found: true
}

// A destination that refuses a message for good (publisher.Permanent: a
// 4xx answer, a schema violation) sends it to the dead letters at once,
// without retries, and the messages behind it go on. Once the cause is
// fixed an operator finds it and requeues it through the admin API
// (package admin; `outbox dead requeue` on the command line does the
// same), and the relay delivers it.
func Example_deadLetter() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var fixed atomic.Bool // the consumer's schema is fixed later on
	delivered := make(chan string, 1)
	deliver := outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
		if !fixed.Load() {
			return publisher.Permanent(errors.New("422: unknown field coupon"))
		}
		delivered <- fmt.Sprintf("delivered %s (attempt %d)", env.Payload, env.Attempt)
		return nil
	})
	relay, err := outbox.NewRelay(drv, quietRelay(outbox.Route{Pattern: "*", Publisher: deliver}))
	if err != nil {
		log.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- relay.Run(ctx) }()

	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		_, err := producer.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Payload: []byte(`{"order_id":42,"coupon":"SPRING"}`)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	waitFor("a dead letter", func() bool { return countStatus(pool, "dead") == 1 })

	// The admin API, as an operator's tool calls it.
	srv, err := admin.New(drv, &admin.Config{
		Tokens: []admin.Token{{Name: "ops", Secret: "example-token"}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	call := func(method, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://localhost"+path, nil)
		req.Header.Set("Authorization", "Bearer example-token")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	var dead struct {
		Messages []struct {
			MessageID string `json:"message_id"`
			Attempts  int    `json:"attempts"`
			LastError string `json:"last_error"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(call(http.MethodGet, "/api/v1/messages?status=dead").Body).Decode(&dead); err != nil {
		log.Fatal(err)
	}
	for _, m := range dead.Messages {
		fmt.Printf("dead after %d attempt: %s\n", m.Attempts, m.LastError)
	}

	fixed.Store(true)
	rec := call(http.MethodPost, "/api/v1/messages/"+dead.Messages[0].MessageID+"/requeue")
	fmt.Println("requeue:", rec.Code)
	fmt.Println(<-delivered)
	waitFor("the message sent", func() bool { return countStatus(pool, "sent") == 1 })
	cancel()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	// Output:
	// dead after 1 attempt: 422: unknown field coupon
	// requeue: 200
	// delivered {"order_id":42,"coupon":"SPRING"} (attempt 1)
}

// A fleet serves many databases (one per tenant, say) from a few relay
// processes: each database is served by one member at a time, chosen
// through a shared coordination database. Here one member serves two
// tenant databases.
func ExampleNewFleet() {
	_, coordDrv, cleanup := exampledb.Open() // outbox.Migrate made the fleet's table
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The tenants' databases, each with a message waiting.
	var dbs []outbox.FleetDatabase
	var tenants []*pgxpool.Pool
	for _, tenant := range []string{"acme", "globex"} {
		pool, drv, cleanup := exampledb.Open()
		defer cleanup()
		producer, err := outbox.NewProducer(drv, nil)
		if err != nil {
			log.Fatal(err)
		}
		err = drv.InTx(ctx, func(tx pgx.Tx) error {
			_, err := producer.Enqueue(ctx, tx, outbox.Message{Topic: "invoice.issued", Payload: fmt.Appendf(nil, `{"tenant":%q}`, tenant)})
			return err
		})
		if err != nil {
			log.Fatal(err)
		}
		tenants = append(tenants, pool)
		dbs = append(dbs, outbox.FleetDatabase{
			Name: tenant,
			// Open connects when this member starts serving the
			// database; these are open already, so there is nothing
			// to close.
			Open: func(context.Context) (outbox.FleetDriver, func(), error) {
				d, err := outbox.FleetDriverOf(drv)
				return d, nil, err
			},
		})
	}

	dest := &memoryDestination{}
	fleet, err := outbox.NewFleet(coordDrv, &outbox.FleetConfig{
		Member:    "relay-1",
		Heartbeat: 100 * time.Millisecond,
		MemberTTL: time.Second,
		Relay:     *quietRelay(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(dest.Publish)}),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := fleet.SetDatabases(dbs); err != nil {
		log.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- fleet.Run(ctx) }()
	waitFor("both tenants' messages sent", func() bool {
		return countStatus(tenants[0], "sent") == 1 && countStatus(tenants[1], "sent") == 1
	})
	fmt.Println(fleet.Member(), "serves", fleet.Serving())
	cancel()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	for _, line := range dest.Sorted() {
		fmt.Println(line)
	}
	// Output:
	// relay-1 serves [acme globex]
	// invoice.issued {"tenant":"acme"}
	// invoice.issued {"tenant":"globex"}
}

// Retention removes settled messages once they are old enough (by
// default sent ones after a day, dead ones after 14 days); with Archive
// it moves them to outbox_messages_archive instead. The example keeps sent
// messages for an instant only and sweeps every few milliseconds.
func ExampleRetentionConfig() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = drv.InTx(ctx, func(tx pgx.Tx) error {
		_, err := producer.EnqueueMany(ctx, tx, []outbox.Message{
			{Topic: "order.created", Payload: []byte(`1`)},
			{Topic: "order.created", Payload: []byte(`2`)},
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	var archived atomic.Int64
	cfg := quietRelay(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(func(context.Context, *outbox.Envelope) error { return nil })})
	cfg.Retention = &outbox.RetentionConfig{
		Sent:     time.Millisecond,
		Interval: 10 * time.Millisecond,
		Archive:  true,
		OnSweep:  func(r outbox.RetentionReport) { archived.Add(r.Removed) },
	}
	relay, err := outbox.NewRelay(drv, cfg)
	if err != nil {
		log.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- relay.Run(ctx) }()
	waitFor("both messages archived", func() bool { return archived.Load() == 2 })
	cancel()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}

	var inTable, inArchive int
	if err := pool.QueryRow(context.Background(), "SELECT (SELECT count(*) FROM outbox_messages), (SELECT count(*) FROM outbox_messages_archive)").Scan(&inTable, &inArchive); err != nil {
		log.Fatal(err)
	}
	fmt.Println("outbox_messages:", inTable)
	fmt.Println("outbox_messages_archive:", inArchive)
	// Output:
	// outbox_messages: 0
	// outbox_messages_archive: 2
}

// A RetryPolicy decides the wait after each failed attempt. A Schedule
// gives the waits outright; Horizon is how long a message can keep being
// retried, which is how long consumers must keep their dedupe records.
func ExampleRetryPolicy() {
	p := outbox.RetryPolicy{Schedule: []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute}}
	var waits []string
	for attempt := 1; attempt <= 5; attempt++ {
		waits = append(waits, p.Delay(attempt).String())
	}
	fmt.Println("waits:", strings.Join(waits, ", "))
	fmt.Println("horizon of 5 attempts:", p.Horizon(5))

	// The default curve: at most n⁵ seconds after failed attempt n.
	var def outbox.RetryPolicy
	fmt.Println("default ceilings:", def.Ceiling(1), def.Ceiling(2), def.Ceiling(3))
	fmt.Println("default horizon of 10 attempts:", def.Horizon(10).Round(time.Hour))
	// Output:
	// waits: 10s, 1m0s, 5m0s, 5m0s, 5m0s
	// horizon of 5 attempts: 11m10s
	// default ceilings: 1s 32s 4m3s
	// default horizon of 10 attempts: 34h0m0s
}

// Route patterns match dot-separated topics: "*" one segment, ">" as the
// last segment one or more, and "*" alone every topic.
func ExampleMatchTopic() {
	topics := []string{"order.created", "order.item.added", "user.signed_up"}
	for _, pattern := range []string{"order.*", "order.>", "*"} {
		var matched []string
		for _, t := range topics {
			if outbox.MatchTopic(pattern, t) {
				matched = append(matched, t)
			}
		}
		sort.Strings(matched)
		fmt.Printf("%-8s %v\n", pattern, matched)
	}
	fmt.Println(outbox.ValidatePattern("order.>.created") != nil)
	// Output:
	// order.*  [order.created]
	// order.>  [order.created order.item.added]
	// *        [order.created order.item.added user.signed_up]
	// true
}
