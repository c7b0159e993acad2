package relaytest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// keyLog is a publisher that fails a share of its calls and records, per
// key, the payloads it accepted in order.
type keyLog struct {
	mu       sync.Mutex
	rnd      *rand.Rand
	failRate float64
	byKey    map[string][]string
	ids      map[string]int
}

func (k *keyLog) Publish(_ context.Context, batch []*outbox.Envelope) []error {
	k.mu.Lock()
	defer k.mu.Unlock()
	errs := make([]error, len(batch))
	for i, e := range batch {
		if k.rnd.Float64() < k.failRate {
			errs[i] = errors.New("refused")
			continue
		}
		k.byKey[e.Key] = append(k.byKey[e.Key], string(e.Payload))
		k.ids[e.ID]++
	}
	return errs
}

func (k *keyLog) Close() error { return nil }

func (k *keyLog) distinct() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.ids)
}

// TestSnapshotReadDelivers: a relay reading by snapshots, to a
// destination that refuses a fifth of the messages, while producers
// (library and plain SQL) commit: every message arrives, each key's
// messages in order, a delivered message's row is not written unless it
// failed first, and the cursors the relay leaves on its way out cover
// every message. A relay whose read path does not match the database's
// refuses to start.
func TestSnapshotReadDelivers(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	ctx := t.Context()
	cfg := func(pub outbox.Publisher, snapshot bool) *outbox.RelayConfig {
		return &outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "*", Publisher: pub}}, SnapshotRead: snapshot,
			MaxPollInterval: 50 * time.Millisecond, LeaseTTL: time.Second,
			Retry: outbox.RetryPolicy{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond}, Logger: relaytest.Logger()}
	}
	start := func(c *outbox.RelayConfig) error {
		r, err := outbox.NewRelay(db.PGX, c)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return r.Run(rctx)
	}
	if err := start(cfg(&keyLog{}, true)); err == nil || !strings.Contains(err.Error(), "snapshot read is not enabled") {
		t.Fatalf("a snapshot relay on a table read database: %v", err)
	}
	if err := db.Store().EnableSnapshotRead(ctx); err != nil {
		t.Fatal(err)
	}
	if err := start(cfg(&keyLog{}, false)); err == nil || !strings.Contains(err.Error(), "read by snapshots") {
		t.Fatalf("a table relay on a snapshot read database: %v", err)
	}

	const keys, perKey = 40, 60
	e := relaytest.NewEnqueuer(t, db)
	pub := &keyLog{rnd: rand.New(rand.NewPCG(uint64(seed(t)), 1)), failRate: 0.2, byKey: map[string][]string{}, ids: map[string]int{}}
	r, err := outbox.NewRelay(db.PGX, cfg(pub, true))
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	var wg sync.WaitGroup
	for k := range keys {
		wg.Go(func() {
			for i := range perKey {
				key := fmt.Sprintf("k%d", k)
				payload := fmt.Sprintf(`{"key":%q,"n":%d}`, key, i)
				if i%3 == 0 {
					db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('t.plain', $1, $2)`, key, payload)
					continue
				}
				if _, err := e.Enqueue(ctx, []outbox.Message{{Topic: "t.lib", Key: key, Payload: []byte(payload)}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	relaytest.WaitFor(t, 2*time.Minute, "every message delivered", func() bool { return pub.distinct() == keys*perKey })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		got := pub.byKey[key]
		n := 0
		for _, p := range got {
			if p == fmt.Sprintf(`{"key":%q,"n":%d}`, key, n) {
				n++
			} else if p != fmt.Sprintf(`{"key":%q,"n":%d}`, key, n-1) {
				t.Fatalf("key %s: %s after message %d", key, p, n-1)
			}
		}
		if n != perKey {
			t.Fatalf("key %s: %d of %d in order", key, n, perKey)
		}
	}
	untouched := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND outbox_txid IS NOT NULL AND attempts = 0`)
	sent := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'sent' AND outbox_txid IS NULL`)
	t.Logf("%d messages delivered without a write, %d through the table domain", untouched, sent)
	if untouched+sent != keys*perKey || untouched == 0 || sent == 0 {
		t.Fatalf("%d rows untouched + %d sent, want %d in all, of both", untouched, sent, keys*perKey)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND NOT outbox_delivered(partition_no, outbox_txid, id)`); n != 0 {
		t.Fatalf("%d pending rows not covered by the cursors left behind", n)
	}
}
