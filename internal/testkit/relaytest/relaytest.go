// Package relaytest runs an outbox relay over a per-test database (see
// testdb) for the integration tests of the relay and its publishers: it
// starts the relay and stops it at cleanup, commits messages in pgx
// transactions as an application would, waits for conditions with a
// deadline, counts rows by status and checks per-key order at a consumer.
package relaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// stopTimeout is how long a relay may take to stop at cleanup before the
// test fails.
const stopTimeout = 30 * time.Second

// Logger is the logger for relays and publishers under test: silent,
// unless OUTBOX_TEST_LOG is set, when it writes debug logs to stderr.
func Logger() *slog.Logger {
	if os.Getenv("OUTBOX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// Config is a relay configuration that routes every topic to p and is
// quick enough for tests: a 2 s lease, polls at most 100 ms apart and
// retries backing off from 50 ms to 200 ms, logging to Logger. Callers
// change the fields their test needs.
func Config(p outbox.Publisher) *outbox.RelayConfig {
	return &outbox.RelayConfig{
		Routes:          []outbox.Route{{Pattern: "*", Publisher: p}},
		Logger:          Logger(),
		LeaseTTL:        2 * time.Second,
		MaxPollInterval: 100 * time.Millisecond,
		Retry:           outbox.RetryPolicy{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond},
	}
}

// Start builds a relay over db (its pgx driver on PostgreSQL) with cfg (a
// nil Logger becomes Logger) and runs it as Run does.
func Start(t testing.TB, db *testdb.DB, cfg *outbox.RelayConfig) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = Logger()
	}
	r, err := db.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Run(t, r)
}

// Run runs r in the background until stop is called or the test ends,
// whichever comes first. Stopping cancels Run and waits for it: an error
// from Run, or a relay still running after 30 s, fails the test.
func Run(t testing.TB, r *outbox.Relay) (stop func()) {
	t.Helper()
	return Go(t, "relay", stopTimeout, r.Run)
}

// Go runs fn in the background until stop is called or the test ends,
// whichever comes first. Stopping cancels fn's context and waits for it
// to return: an error from fn, or fn still running after within, fails
// the test, naming what ran.
func Go(t testing.TB, what string, within time.Duration, fn func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: %v", what, err)
				}
			case <-time.After(within):
				t.Errorf("%s did not return within %v of being stopped", what, within)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// WaitFor polls cond every 10 ms until it holds, failing the test with
// what it was waiting for once d has passed.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Count is how many rows of db's outbox have status ("pending", "sent"
// or "dead").
func Count(t testing.TB, db *testdb.DB, status string) int {
	t.Helper()
	return db.Count(t, testdb.Placeholder(db.Dialect, "SELECT count(*) FROM outbox_messages WHERE "+db.Status()+" = ?"), status)
}

// SentIDs are the message ids of the rows of db's outbox marked sent, so
// that a test can check each of them arrived. db must be PostgreSQL.
func SentIDs(t testing.TB, db *testdb.DB) []string {
	t.Helper()
	return db.Strings(t, "SELECT message_id FROM outbox_messages WHERE "+db.Status()+" = 'sent'")
}

// Enqueuer commits messages through the outbox producer inside pgx
// transactions on db's pool, as an application would, and remembers the
// ids it committed. It is safe for concurrent use.
type Enqueuer struct {
	db  *testdb.DB
	p   *outbox.Producer[pgx.Tx]
	mu  sync.Mutex
	ids []string
}

// NewEnqueuer is an Enqueuer over db, which must be PostgreSQL.
func NewEnqueuer(t testing.TB, db *testdb.DB) *Enqueuer {
	t.Helper()
	p, err := outbox.NewProducer(db.PGX, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Enqueuer{db: db, p: p}
}

// Enqueue commits msgs in one transaction and returns their ids; on an
// error nothing is committed.
func (e *Enqueuer) Enqueue(ctx context.Context, msgs []outbox.Message) ([]string, error) {
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	ids, err := e.p.EnqueueMany(ctx, tx, msgs)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.ids = append(e.ids, ids...)
	e.mu.Unlock()
	return ids, nil
}

// IDs are the ids of every message committed so far, in commit order.
func (e *Enqueuer) IDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.ids...)
}

// Flow commits total messages of topic made by Messages over keys keys,
// perTx in each transaction with pause after each, in the background: a
// steady flow for a test to disturb. The channel yields the first error
// or, once all are committed, nil.
func (e *Enqueuer) Flow(topic string, total, perTx, keys int, pause time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		for from := 0; from < total; from += perTx {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := e.Enqueue(ctx, Messages(topic, from, min(perTx, total-from), keys))
			cancel()
			if err != nil {
				done <- err
				return
			}
			time.Sleep(pause)
		}
		done <- nil
	}()
	return done
}

// Messages are n messages of topic numbered from, spread over keys keys:
// message seq (from, from+1, …) has key "key-<seq%keys>" and the JSON
// payload {"k":<seq%keys>,"seq":<seq>}, which KeyOrder reads.
func Messages(topic string, from, n, keys int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		seq := from + i
		k := seq % keys
		out[i] = outbox.Message{Topic: topic, Key: fmt.Sprintf("key-%d", k), Payload: fmt.Appendf(nil, `{"k":%d,"seq":%d}`, k, seq)}
	}
	return out
}

// KeyOrder checks at a consumer that each key's messages, as made by
// Messages, first arrive in the order they were enqueued. A redelivered
// copy (an id already seen) is skipped, as consumers dedupe by message
// id. The zero value is ready to use.
type KeyOrder struct {
	seen map[string]bool
	last map[int]int
}

// Check records the arrival of the message with id and payload. It fails
// the test at once if the payload is not one Messages made, and marks it
// failed if the message is the first of its id to arrive after a later
// message of its key.
func (o *KeyOrder) Check(t testing.TB, id string, payload []byte) {
	t.Helper()
	if o.seen == nil {
		o.seen, o.last = map[string]bool{}, map[int]int{}
	}
	if o.seen[id] {
		return
	}
	o.seen[id] = true
	var m struct{ K, Seq int }
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatalf("payload %q: %v", payload, err)
	}
	if prev, ok := o.last[m.K]; ok && m.Seq < prev {
		t.Errorf("key-%d: seq %d first arrived after %d", m.K, m.Seq, prev)
	}
	o.last[m.K] = m.Seq
}
