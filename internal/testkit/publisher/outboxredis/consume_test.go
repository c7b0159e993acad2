package outboxredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxredis"
)

// fast are ConsumeOptions quick enough for tests.
var fast = &outboxredis.ConsumeOptions{Block: 100 * time.Millisecond, RetryDelay: 50 * time.Millisecond}

// consume runs Consume in the background until the test ends, then
// checks it returned nil.
func consume(t *testing.T, c redis.UniversalClient, stream, name string, opts *outboxredis.ConsumeOptions, h func(context.Context, *inbox.Message) error) {
	t.Helper()
	relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error {
		return outboxredis.Consume(ctx, c, stream, "consumers", name, h, opts)
	})
}

// effectsDB is a test database with an effect table and an inbox over it.
func effectsDB(t *testing.T) (*testdb.DB, *inbox.Inbox[pgx.Tx]) {
	t.Helper()
	db := testdb.New(t, store.Postgres)
	db.Exec(t, `CREATE TABLE effects (message_id text NOT NULL)`)
	ib, err := inbox.New(db.PGX, &inbox.Config{Consumer: "inventory"})
	if err != nil {
		t.Fatal(err)
	}
	return db, ib
}

// applyOnce is a handler that inserts one effect row through ib.
func applyOnce(ib *inbox.Inbox[pgx.Tx]) func(context.Context, *inbox.Message) error {
	return func(ctx context.Context, m *inbox.Message) error {
		_, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, m.ID)
			return err
		})
		return err
	}
}

func TestDecodeRejectsForeignEntries(t *testing.T) {
	t.Parallel()
	for _, x := range []redis.XMessage{
		{ID: "1-0", Values: map[string]any{"payload": "x"}},
		{ID: "2-0", Values: map[string]any{"message_id": "a", "headers": "[1]"}},
		{ID: "3-0"}, // deleted while pending
	} {
		if _, err := outboxredis.Decode("s", x); !errors.Is(err, outboxredis.ErrNotOutboxEntry) {
			t.Errorf("Decode(%v): %v, want ErrNotOutboxEntry", x, err)
		}
	}
}

func TestConsumeMissingGroup(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	stream := streamName(t, admin, "nogroup")
	err := outboxredis.Consume(context.Background(), admin, stream, "consumers", "c1", func(context.Context, *inbox.Message) error { return nil }, fast)
	if !errors.Is(err, outboxredis.ErrNoGroup) {
		t.Fatalf("Consume without a group: %v, want ErrNoGroup", err)
	}
	// CreateGroup makes it, reading from the start.
	if errs := publish(newPublisher(t, admin, &outboxredis.Config{CreateStreams: true}), env(stream, "k", `{}`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := make(chan string, 1)
	consume(t, admin, stream, "c1", &outboxredis.ConsumeOptions{Block: 100 * time.Millisecond, CreateGroup: true}, func(_ context.Context, m *inbox.Message) error {
		got <- m.ID
		return nil
	})
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("CreateGroup: nothing consumed within 10s")
	}
}

// TestConsumeReclaimsPending: entries read but not acked by a crashed run
// of this consumer are processed when it starts again, and with ClaimIdle
// those of a consumer that never came back are taken over.
func TestConsumeReclaimsPending(t *testing.T) {
	t.Parallel()
	admin, stream := localStream(t, "reclaim")
	db, ib := effectsDB(t)
	if errs := publish(newPublisher(t, admin, nil), env(stream, "a", `{}`), env(stream, "b", `{}`)); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	// "c1" and "dead" each read one entry and crash before acking.
	for _, name := range []string{"c1", "dead"} {
		if err := admin.XReadGroup(context.Background(), &redis.XReadGroupArgs{Group: "consumers", Consumer: name, Streams: []string{stream, ">"}, Count: 1, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	consume(t, admin, stream, "c1", &outboxredis.ConsumeOptions{Block: 100 * time.Millisecond, ClaimIdle: 200 * time.Millisecond}, applyOnce(ib))
	relaytest.WaitFor(t, 15*time.Second, "both entries applied and acked", func() bool {
		p, err := admin.XPending(context.Background(), stream, "consumers").Result()
		return db.Count(t, `SELECT count(*) FROM effects`) == 2 && err == nil && p.Count == 0
	})
}
