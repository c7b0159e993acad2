package outboxpgx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// batchedDB is a migrated PostgreSQL schema with a business table and a
// producer over the pipelined driver.
func batchedDB(t *testing.T, cfg *outbox.Config) (*testdb.DB, *outbox.Producer[*pgx.Batch]) {
	t.Helper()
	db := testdb.New(t, store.Postgres)
	db.Exec(t, "CREATE TABLE orders (id BIGINT PRIMARY KEY, note TEXT NOT NULL)")
	p, err := outbox.NewProducer(db.PGX.Batched(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return db, p
}

// sendInTx queues an order row and msgs on one batch, sends it in a
// transaction of the pool, runs inTx in that transaction, and commits
// unless inTx fails. It returns the message ids and the transaction's
// error.
func sendInTx(t *testing.T, db *testdb.DB, p *outbox.Producer[*pgx.Batch], order int, msgs []outbox.Message, inTx func(pgx.Tx) error) ([]string, error) {
	t.Helper()
	ctx := context.Background()
	var ids []string
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue("INSERT INTO orders (id, note) VALUES ($1, 'new')", order)
		var err error
		if ids, err = p.EnqueueMany(ctx, batch, msgs); err != nil {
			return err
		}
		if batch.Len() != 1+len(msgs) {
			t.Errorf("the batch holds %d statements, want the order and %d inserts", batch.Len(), len(msgs))
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		if inTx != nil {
			return inTx(tx)
		}
		return nil
	})
	return ids, err
}

func countIn(t *testing.T, tx pgx.Tx, q string, args ...any) int {
	t.Helper()
	var n int
	if err := tx.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestBatchedSharesTheTransaction: the queued inserts run in the caller's
// transaction with its own statements: visible inside it once the batch
// is sent, committed with it, gone with its rollback, and never written
// when the batch is not sent.
func TestBatchedSharesTheTransaction(t *testing.T) {
	db, p := batchedDB(t, &outbox.Config{DisableNotify: true})
	msg := outbox.Message{Topic: "order.created", Key: "order-1", Payload: []byte(`{"id":1}`)}
	errRollback := errors.New("roll back")
	ids, err := sendInTx(t, db, p, 1, []outbox.Message{msg}, func(tx pgx.Tx) error {
		if n := countIn(t, tx, "SELECT count(*) FROM outbox_messages WHERE topic = 'order.created'"); n != 1 {
			t.Errorf("the transaction sees %d messages after its batch, want 1", n)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("transaction: %v", err)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE message_id = $1", ids[0]); n != 0 {
		t.Fatalf("%d rows of a message whose transaction rolled back, want 0", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM orders"); n != 0 {
		t.Fatalf("%d orders after the rollback, want 0", n)
	}

	// Queued but never sent: nothing reaches the database.
	if _, err := p.Enqueue(context.Background(), &pgx.Batch{}, msg); err != nil {
		t.Fatal(err)
	}
	if ids, err = sendInTx(t, db, p, 2, []outbox.Message{msg}, nil); err != nil {
		t.Fatal(err)
	}
	got := db.Strings(t, "SELECT message_id::text || ' ' || topic || ' ' || business_key || ' ' || payload FROM outbox_messages")
	if len(got) != 1 || got[0] != ids[0]+" order.created order-1 "+`{"id":1}` {
		t.Fatalf("rows %q, want the committed message %s only", got, ids[0])
	}
	if n := db.Count(t, "SELECT count(*) FROM orders WHERE id = 2"); n != 1 {
		t.Fatalf("%d orders of the committed transaction, want 1", n)
	}
}

// TestBatchedDelivers: a relay over the ordinary driver delivers what the
// batches committed, a key's messages in the order of the call, and the
// producer's in-process wake-up reaches a relay that would not poll again
// for ten minutes.
func TestBatchedDelivers(t *testing.T) {
	// The wake-up fires NotifyInterval after the batch's results are read;
	// the interval must outlast the commit that follows (see the
	// conformance suite's in-process wake-up test).
	db, p := batchedDB(t, &outbox.Config{NotifyInterval: 500 * time.Millisecond, DisableNotify: true})
	got := make(chan *outbox.Envelope, 16)
	r, err := outbox.NewRelay(db.PGX, &outbox.RelayConfig{
		Routes: []outbox.Route{{Pattern: "*", Publisher: outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
			got <- env
			return nil
		})}},
		MinPollInterval: 10 * time.Minute,
		MaxPollInterval: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	}()
	next := func(what string) *outbox.Envelope {
		t.Helper()
		select {
		case env := <-got:
			return env
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
			return nil
		}
	}
	// The relay's first round finds nothing; it then sleeps ten minutes
	// unless woken.
	time.Sleep(300 * time.Millisecond)
	msgs := []outbox.Message{
		{Topic: "order.created", Key: "order-7", Payload: []byte(`{"n":1}`), Headers: map[string]string{"h": "v"}},
		{Topic: "order.paid", Key: "order-7", Payload: []byte(`{"n":2}`)},
		{Topic: "order.shipped", Key: "order-7", Payload: []byte("not json"), ContentType: "text/plain"},
	}
	ids, err := sendInTx(t, db, p, 7, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range msgs {
		env := next("message " + ids[i])
		if env.ID != ids[i] || env.Topic != want.Topic || env.Key != want.Key || string(env.Payload) != string(want.Payload) {
			t.Fatalf("delivery %d: %s %s %s %q; want %s %s %s %q", i, env.ID, env.Topic, env.Key, env.Payload, ids[i], want.Topic, want.Key, want.Payload)
		}
	}
}

// TestBatchedRefusals: an invalid message is refused before anything is
// queued; a taken message id fails the batch with ErrDuplicateMessageID
// and leaves the transaction usable; statements other than the inserts
// are refused by the batch's executor.
func TestBatchedRefusals(t *testing.T) {
	db, p := batchedDB(t, &outbox.Config{DisableNotify: true})
	ctx := context.Background()
	batch := &pgx.Batch{}
	_, err := p.EnqueueMany(ctx, batch, []outbox.Message{{Topic: "ok", Payload: []byte(`1`)}, {Topic: "bad topic", Payload: []byte(`1`)}})
	var verr *outbox.ValidationError
	if !errors.As(err, &verr) || verr.Index != 1 || !errors.Is(err, outbox.ErrInvalidTopic) {
		t.Fatalf("invalid topic: %v; want a *ValidationError for message 1", err)
	}
	if _, err := p.Enqueue(ctx, batch, outbox.Message{Topic: "ok", Payload: []byte(`{not json`)}); !errors.Is(err, outbox.ErrInvalidJSON) {
		t.Fatalf("invalid JSON: %v; want ErrInvalidJSON", err)
	}
	if batch.Len() != 0 {
		t.Fatalf("refused messages queued %d statements, want 0", batch.Len())
	}

	const id = "0190a0a0-0000-7000-8000-0000000000aa"
	taken := outbox.Message{ID: id, Topic: "order.created", Payload: []byte(`1`)}
	if _, err := sendInTx(t, db, p, 1, []outbox.Message{taken}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = sendInTx(t, db, p, 2, []outbox.Message{{Topic: "order.created", Payload: []byte(`2`)}, taken}, nil)
	if !errors.Is(err, outbox.ErrDuplicateMessageID) {
		t.Fatalf("a batch with a taken id: %v; want ErrDuplicateMessageID", err)
	}
	// The duplicate did not abort the transaction: it goes on and commits.
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		if _, err := p.Enqueue(ctx, b, taken); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, b).Close(); !errors.Is(err, outbox.ErrDuplicateMessageID) {
			t.Errorf("duplicate: %v; want ErrDuplicateMessageID", err)
		}
		_, err := tx.Exec(ctx, "INSERT INTO orders (id, note) VALUES (3, 'after the duplicate')")
		return err
	})
	if err != nil {
		t.Fatalf("the transaction after a duplicate: %v", err)
	}
	if n := db.Count(t, "SELECT count(*) FROM orders WHERE id = 3"); n != 1 {
		t.Fatalf("%d rows of the statement after the duplicate, want 1", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages"); n != 1 {
		t.Fatalf("%d messages, want the first one only", n)
	}

	ex := db.PGX.Batched().UnwrapExecutor(&pgx.Batch{})
	if _, err := ex.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("the batch's executor ran a statement it cannot report on")
	}
	if _, err := ex.Query(ctx, "SELECT 1"); err == nil {
		t.Fatal("the batch's executor ran a query it cannot answer")
	}
}
