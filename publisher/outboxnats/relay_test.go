package outboxnats_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

func quietLogger() *slog.Logger {
	if os.Getenv("OUTBOX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// runRelay runs a relay over db with one route to p until cleanup.
func runRelay(t *testing.T, db *testdb.DB, p outbox.Publisher, tweak func(*outbox.RelayConfig)) {
	t.Helper()
	cfg := &outbox.RelayConfig{
		Routes:          []outbox.Route{{Pattern: "*", Publisher: p, Name: "nats"}},
		Logger:          quietLogger(),
		LeaseTTL:        2 * time.Second,
		MaxPollInterval: 100 * time.Millisecond,
		Retry:           outbox.RetryPolicy{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond},
	}
	if tweak != nil {
		tweak(cfg)
	}
	r, err := outbox.NewRelay(db.PGX, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("relay run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("relay did not stop within 30s")
			}
		})
	})
}

// enqueuer commits messages with the outbox producer inside pgx
// transactions, as an application would.
type enqueuer struct {
	db  *testdb.DB
	p   *outbox.Producer[pgx.Tx]
	mu  sync.Mutex
	ids []string
}

func newEnqueuer(t *testing.T, db *testdb.DB) *enqueuer {
	t.Helper()
	p, err := outbox.NewProducer(db.PGX, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &enqueuer{db: db, p: p}
}

func (e *enqueuer) enqueue(ctx context.Context, msgs []outbox.Message) error {
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	ids, err := e.p.EnqueueMany(ctx, tx, msgs)
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	e.ids = append(e.ids, ids...)
	e.mu.Unlock()
	return nil
}

func (e *enqueuer) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.ids...)
}

// orderMsgs are n messages of topic spread over keys, each payload saying
// its key and its sequence number within the key.
func orderMsgs(topic string, from, n, keys int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		seq := from + i
		k := seq % keys
		out[i] = outbox.Message{Topic: topic, Key: fmt.Sprintf("key-%d", k), Payload: fmt.Appendf(nil, `{"k":%d,"seq":%d}`, k, seq/keys)}
	}
	return out
}

// newPostgres is a per-test PostgreSQL database with the outbox schema.
func newPostgres(t *testing.T) *testdb.DB {
	t.Helper()
	return testdb.New(t, store.Postgres)
}
