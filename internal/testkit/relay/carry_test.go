package relay_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
)

// countingStore is a PostgreSQL store that counts the settles written on
// their own and the combined settle-and-reads, and can fail the latter.
type countingStore struct {
	*store.Store
	settles, combined atomic.Int32
	// failCombined, when set, is what SettleReadMark returns instead of
	// running (after ctx ends, when block is set).
	failCombined error
	block        bool
	entered      chan struct{} // closed at the first blocked call
	once         sync.Once
}

func (c *countingStore) Settle(ctx context.Context, owner string, outs []store.Outcome) (int64, error) {
	c.settles.Add(1)
	return c.Store.Settle(ctx, owner, outs)
}

func (c *countingStore) SettleReadMark(ctx context.Context, owner string, outs []store.Outcome, parts []int, limit int) ([]store.Row, int64, error) {
	c.combined.Add(1)
	if c.block {
		c.once.Do(func() { close(c.entered) })
		<-ctx.Done()
		return nil, 0, ctx.Err()
	}
	if c.failCombined != nil {
		return nil, 0, c.failCombined
	}
	return c.Store.SettleReadMark(ctx, owner, outs, parts, limit)
}

// countingPublisher counts the publishes of each message.
type countingPublisher struct {
	mu   sync.Mutex
	seen map[string]int
}

func (p *countingPublisher) Publish(_ context.Context, batch []*publisher.Envelope) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	for _, env := range batch {
		p.seen[env.ID]++
	}
	return make([]error, len(batch))
}

func (p *countingPublisher) counts() (messages, publishes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.seen {
		publishes += n
	}
	return len(p.seen), publishes
}

// startCarryRelay runs a one-worker relay over cs on PostgreSQL; the
// returned stop cancels it and waits for Run to return.
func startCarryRelay(t *testing.T, db *testdb.DB, cs *countingStore, pub relay.Publisher, onBatch func(relay.BatchReport)) (stop func()) {
	t.Helper()
	r, err := relay.New(db.Backend(), relay.Config{
		Routes: []relay.Route{{Pattern: "order.*", Publisher: pub}}, ID: "carry-" + testdb.RandomName(""),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), BatchSize: 100, Workers: 1, MinBatchSize: 10,
		MinPollInterval: 5 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond, PublishTimeout: 5 * time.Second,
		ShutdownTimeout: time.Second, LeaseTTL: 5 * time.Second, MaxPayloadBytes: 1 << 20, MetricsInterval: time.Minute,
		Store: cs, OnBatch: onBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func enqueueOne(t *testing.T, db *testdb.DB) {
	t.Helper()
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload) VALUES ('order.created', '{}')`)
}

func waitSent(t *testing.T, db *testdb.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'") < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d messages sent after 30 s: %v", n, db.Statuses(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCarriedSettleGoesWithTheNextRead: on PostgreSQL a round's settle is
// written by the next read's statement, not by one of its own; every
// message is recorded sent once, and OnBatch reports each round settled.
func TestCarriedSettleGoesWithTheNextRead(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	cs := &countingStore{Store: db.Store()}
	pub := &countingPublisher{}
	var sent, settled atomic.Int64
	stop := startCarryRelay(t, db, cs, pub, func(rep relay.BatchReport) {
		sent.Add(int64(rep.Sent))
		settled.Add(rep.Settled)
	})
	const n = 20
	for i := range n {
		enqueueOne(t, db)
		waitSent(t, db, i+1)
	}
	if got := cs.settles.Load(); got != 0 {
		t.Errorf("%d settles on their own while running, want 0: each goes with the next read", got)
	}
	if got := cs.combined.Load(); got < n {
		t.Errorf("%d combined settle-and-reads for %d one-message rounds", got, n)
	}
	stop()
	if msgs, pubs := pub.counts(); msgs != n || pubs != n {
		t.Fatalf("published %d messages %d times, want %d once each", msgs, pubs, n)
	}
	if sent.Load() != n || settled.Load() != n {
		t.Fatalf("OnBatch: %d sent, %d settled; want %d and %d", sent.Load(), settled.Load(), n, n)
	}
}

// TestCarriedSettleWrittenWhenTheCombinedStatementFails: a combined
// statement that fails leaves the settle to a statement of its own; the
// message is recorded sent and published once.
func TestCarriedSettleWrittenWhenTheCombinedStatementFails(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	cs := &countingStore{Store: db.Store(), failCombined: errors.New("connection reset by peer")}
	pub := &countingPublisher{}
	startCarryRelay(t, db, cs, pub, nil)
	for i := range 3 {
		enqueueOne(t, db)
		waitSent(t, db, i+1)
	}
	if cs.settles.Load() == 0 || cs.combined.Load() == 0 {
		t.Fatalf("settles %d, combined %d: want the failed combined statements settled on their own", cs.settles.Load(), cs.combined.Load())
	}
	if msgs, pubs := pub.counts(); msgs != 3 || pubs != 3 {
		t.Fatalf("published %d messages %d times, want 3 once each", msgs, pubs)
	}
}

// TestCarriedSettleWrittenAtShutdown: a relay stopped while a settle is
// carried (its next read held up) writes it before Run returns.
func TestCarriedSettleWrittenAtShutdown(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	cs := &countingStore{Store: db.Store(), block: true, entered: make(chan struct{})}
	pub := &countingPublisher{}
	stop := startCarryRelay(t, db, cs, pub, nil)
	enqueueOne(t, db)
	select {
	case <-cs.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the settle was never carried to a next read")
	}
	if got := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'"); got != 0 {
		t.Fatalf("%d sent while the settle is carried, want 0", got)
	}
	stop()
	if got := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'"); got != 1 {
		t.Fatalf("after Run returned: %d sent, want 1 (%v)", got, db.Statuses(t))
	}
	if msgs, pubs := pub.counts(); msgs != 1 || pubs != 1 {
		t.Fatalf("published %d messages %d times, want 1 once", msgs, pubs)
	}
}
