package scenario_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
)

// recorder is a destination that remembers what arrived: how often each
// message id, and per key the order in which sequence numbers first arrived.
type recorder struct {
	mu       sync.Mutex
	seen     map[string]int
	order    map[string][]int
	total    int
	failRate float64 // share of requests answered with a failure
}

type orderedPayload struct {
	Key string `json:"k"`
	Seq int    `json:"seq"`
}

func newRecorder() *recorder {
	return &recorder{seen: map[string]int{}, order: map[string][]int{}}
}

// accept records a delivery, or refuses it (returning false) at failRate.
func (r *recorder) accept(id string, payload []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failRate > 0 && rand.Float64() < r.failRate {
		return false
	}
	r.total++
	r.seen[id]++
	if r.seen[id] == 1 {
		var p orderedPayload
		if json.Unmarshal(payload, &p) == nil && p.Key != "" {
			r.order[p.Key] = append(r.order[p.Key], p.Seq)
		}
	}
	return true
}

func (r *recorder) counts() (distinct, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen), r.total
}

// checkOrder fails the test if any key's messages first arrived out of
// sequence.
func (r *recorder) checkOrder(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, seqs := range r.order {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Fatalf("key %s: seq %d arrived after %d (%v…)", k, seqs[i], seqs[i-1], seqs[max(0, i-5):min(len(seqs), i+5)])
			}
		}
	}
}

func (r *recorder) publisher() outbox.Publisher {
	return outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
		if !r.accept(env.ID, env.Payload) {
			return fmt.Errorf("destination refused")
		}
		return nil
	})
}

func (r *recorder) server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if !r.accept(req.Header.Get("webhook-id"), body) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// enqueueOrdered enqueues n messages spread over keys, each payload
// carrying its key and its sequence within the key.
func enqueueOrdered(t *testing.T, h *harness.Harness, n, keys int) {
	t.Helper()
	seq := map[string]int{}
	const chunk = 1000
	for start := 0; start < n; start += chunk {
		batch := make([]outbox.Message, 0, chunk)
		for i := start; i < min(n, start+chunk); i++ {
			k := fmt.Sprintf("key-%d", i%keys)
			seq[k]++
			batch = append(batch, outbox.Message{Topic: "order.created", Key: k, Payload: fmt.Appendf(nil, `{"k":%q,"seq":%d}`, k, seq[k])})
		}
		if _, err := h.Enqueue(context.Background(), batch, false); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashRedeliversNeverLoses kills a relay process again and again
// while it drains 50k messages: everything arrives, per-key order holds
// after dedupe, and each kill costs at most one batch of duplicates.
func TestCrashRedeliversNeverLoses(t *testing.T) {
	for _, c := range chaosDrivers {
		t.Run(c.Name, func(t *testing.T) { crashDrain(t, c, 50000, 200, 12) })
	}
}

// crashDrain enqueues n messages over keys and kills relay processes
// (batches of 500) up to maxKills times while they drain: everything
// arrives, per-key order holds after dedupe, and each kill costs at most
// one batch of duplicates.
func crashDrain(t *testing.T, c harness.Case, n, keys, maxKills int) {
	h := harness.New(t, c)
	const batch = 500
	enqueueOrdered(t, h, n, keys)
	rec := newRecorder()
	srv := rec.server(t)
	kills := 0
	deadline := time.Now().Add(5 * time.Minute)
	for {
		before, _ := rec.counts()
		ch := startChild(t, h.DB.URL, srv.URL, fmt.Sprintf("crash-%d", kills), batch, time.Second)
		if kills == 0 {
			// The first kill lands as soon as the relay delivers: a few
			// thousand messages may drain before a fixed pause ends.
			relaytest.WaitFor(t, time.Minute, "the relay delivering", func() bool { d, _ := rec.counts(); return d > before })
		} else {
			time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		}
		if d, _ := rec.counts(); d == n || kills >= maxKills || time.Now().After(deadline) {
			// Let the last one finish in peace.
			relaytest.WaitFor(t, time.Until(deadline)+time.Minute, "full drain", func() bool { d, _ := rec.counts(); return d == n })
			relaytest.WaitFor(t, 30*time.Second, "all rows sent", func() bool {
				return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE "+h.DB.Status()+" <> 'sent'") == 0
			})
			ch.Term(t)
			break
		}
		ch.Kill()
		kills++
	}
	distinct, total := rec.counts()
	if distinct != n {
		t.Fatalf("delivered %d distinct of %d", distinct, n)
	}
	dups := total - distinct
	t.Logf("%d kills, %d duplicates (bound %d)", kills, dups, kills*batch)
	if kills == 0 {
		t.Fatal("the relay was never killed: the test proved nothing")
	}
	if dups > kills*batch {
		t.Fatalf("%d duplicates after %d kills exceeds one batch (%d) per kill", dups, kills, batch)
	}
	rec.checkOrder(t)
}

// TestSeveralRelaysShareWithoutDuplicates runs three relay processes over
// one database with a destination that refuses 20% of deliveries, kills
// one of them midway, and checks per-key order and the duplicate bound.
func TestSeveralRelaysShareWithoutDuplicates(t *testing.T) {
	h := severalRelays(t, 20000, 100)
	if owners := h.DB.Count(t, "SELECT count(*) FROM outbox_leases WHERE owner IS NOT NULL AND owner <> 'relay-0'"); owners != 0 {
		t.Fatalf("%d partitions still owned after both survivors stopped", owners)
	}
}

// severalRelays is TestSeveralRelaysShareWithoutDuplicates' scenario for
// n messages over keys; it returns when the two survivors have stopped.
func severalRelays(t *testing.T, n, keys int) *harness.Harness {
	h := harness.New(t, harness.Case{Name: "pgx", Dialect: store.Postgres, PGX: true})
	const batch = 200
	enqueueOrdered(t, h, n, keys)
	rec := newRecorder()
	rec.failRate = 0.2
	srv := rec.server(t)
	var children []*child
	for i := 0; i < 3; i++ {
		children = append(children, startChild(t, h.DB.URL, srv.URL, fmt.Sprintf("relay-%d", i), batch, 3*time.Second))
	}
	relaytest.WaitFor(t, time.Minute, "three relays sharing the partitions", func() bool {
		return h.DB.Count(t, "SELECT count(DISTINCT owner) FROM outbox_leases WHERE owner IS NOT NULL") == 3
	})
	relaytest.WaitFor(t, time.Minute, "a quarter delivered", func() bool { d, _ := rec.counts(); return d >= n/4 })
	children[0].Kill()
	relaytest.WaitFor(t, 3*time.Minute, "full drain", func() bool { d, _ := rec.counts(); return d == n })
	distinct, total := rec.counts()
	t.Logf("%d delivered, %d duplicates", distinct, total-distinct)
	if total-distinct > batch {
		t.Fatalf("%d duplicates with one kill, bound %d", total-distinct, batch)
	}
	rec.checkOrder(t)
	for _, c := range children[1:] {
		c.Term(t)
	}
	return h
}

// TestRelaysNoDuplicatesWithoutCrash: three in-process relays, random
// failures, no crash → every message exactly once, in key order.
func TestRelaysNoDuplicatesWithoutCrash(t *testing.T) {
	// One partition on SQLite, and the pure-Go SQLite is slow under -race.
	relaysNoDuplicates(t, 40, 3000, 1000)
}

// relaysNoDuplicates is TestRelaysNoDuplicatesWithoutCrash's scenario for
// n messages (nSQLite on SQLite) over keys.
func relaysNoDuplicates(t *testing.T, keys, n, nSQLite int) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		n := n
		if h.DB.Dialect == store.SQLite {
			n = nSQLite
		}
		enqueueOrdered(t, h, n, keys)
		rec := newRecorder()
		rec.failRate = 0.1
		for i := 0; i < 3; i++ {
			cfg := harness.Config(outbox.Route{Pattern: "order.>", Publisher: rec.publisher()})
			cfg.ID = fmt.Sprintf("r%d", i)
			cfg.BatchSize = 100
			r, err := h.NewRelay(cfg)
			if err != nil {
				t.Fatal(err)
			}
			relaytest.Run(t, r)
		}
		relaytest.WaitFor(t, 2*time.Minute, "full drain", func() bool { d, _ := rec.counts(); return d == n })
		if d, tot := rec.counts(); tot != d {
			t.Fatalf("%d duplicates without any crash", tot-d)
		}
		rec.checkOrder(t)
	})
}
