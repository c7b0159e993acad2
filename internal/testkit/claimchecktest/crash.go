package claimchecktest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// RandomPayload is n bytes from a generator seeded with seed: binary,
// incompressible and different for every message.
func RandomPayload(seed uint64, n int) []byte {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(b)
	return b
}

// Hook is a webhook receiver for large payloads: it checks each
// delivery's SHA-256 against the one its message was enqueued with, and,
// once armed, holds one delivery unanswered until released, so that a
// relay can be killed with that publish in flight.
type Hook struct {
	mu      sync.Mutex
	want    map[string][32]byte // message id → SHA-256 of its payload
	ok      map[string]int      // deliveries answered 200 with the right bytes
	total   int                 // every delivery, held ones included
	bad     []string
	holdAt  int // hold the delivery that makes total reach this; 0: none
	held    chan string
	release chan struct{}
}

// NewHook is a Hook that expects no message yet.
func NewHook() *Hook {
	return &Hook{want: map[string][32]byte{}, ok: map[string]int{}}
}

// Expect makes message id, enqueued with payload, one the hook is to
// receive with those bytes. Call it before the relay runs.
func (h *Hook) Expect(id string, payload []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.want[id] = sha256.Sum256(payload)
}

// Expected are the ids of the messages the hook is to receive, sorted.
func (h *Hook) Expected() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.want))
}

// ServeHTTP takes a delivery: 200 when it is of a message the hook
// expects, with the message's bytes; 400 when it is no message; a held
// delivery gets 503 once freed, after the relay that sent it is gone.
func (h *Hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	m, err := inbox.DecodeHTTP(r.Header, body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(body)
	h.mu.Lock()
	h.total++
	want, known := h.want[m.ID]
	right := known && sum == want
	if !right {
		h.bad = append(h.bad, fmt.Sprintf("message %s (known: %v) delivered with %d bytes of SHA-256 %x", m.ID, known, len(body), sum))
	}
	if h.holdAt > 0 && h.total >= h.holdAt {
		h.holdAt = 0
		held, release := h.held, h.release
		h.mu.Unlock()
		held <- m.ID
		<-release
		// The relay that sent it is gone: nobody reads this answer.
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if right {
		h.ok[m.ID]++
	}
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// Arm holds the n-th delivery from now; the returned channel yields its
// message id once it is held, and free answers it.
func (h *Hook) Arm(t *testing.T, n int) (held <-chan string, free func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, release := make(chan string, 1), make(chan struct{})
	var once sync.Once
	h.holdAt, h.held, h.release = h.total+n, ch, release
	free = func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	return ch, free
}

// Delivered is how many deliveries with the right bytes message id had
// answered, and how many deliveries of any message the hook has seen.
func (h *Hook) Delivered(id string) (ok, total int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ok[id], h.total
}

// Mistakes are the deliveries of unknown messages or wrong bytes.
func (h *Hook) Mistakes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bad)
}

// Crash is the crash test of a claim-check store: `outbox relay
// --claim-check STORE` processes deliver the messages Hook expects, kept
// in the store, to Hook inline, and are killed with SIGKILL while one
// delivery is in flight.
type Crash struct {
	// Hook receives the deliveries. Tell it the messages with Expect
	// before Run.
	Hook *Hook
	// Kills is how many relays Run kills. Defaults to 3.
	Kills int
	// Hold is which delivery of each killed relay is held for its kill,
	// counting from its start: by then it has published and settled
	// others, and the kill finds that publish (and whatever else of its
	// round) unconfirmed. When fewer messages are left, the last of them
	// is held, which that relay is sure to deliver. Defaults to 3.
	Hold int
	// BatchSize is the relays' --batch-size. Defaults to 2.
	BatchSize int

	db    *testdb.DB
	url   string
	store string
}

// NewCrash is the crash test of the claim-check store the relay opens
// from the --claim-check value store, over db: it starts Hook's server,
// closed at cleanup. The relays' environment is the test's (credentials
// of the store, set with t.Setenv).
func NewCrash(t *testing.T, db *testdb.DB, store string) *Crash {
	t.Helper()
	c := &Crash{Hook: NewHook(), Kills: 3, Hold: 3, BatchSize: 2, db: db, store: store}
	srv := httptest.NewServer(c.Hook)
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// startRelay runs a relay of id delivering to Hook inline, with payloads
// of up to 8 MiB, leases of 1 s so that a killed relay's messages are
// taken over quickly, quick polls and retries, and the further
// arguments more.
func (c *Crash) startRelay(t *testing.T, id string, more ...string) *relaytest.Process {
	t.Helper()
	args := append([]string{"--to", c.url + "/?claim=inline", "--claim-check", c.store, "--id", id,
		"--max-payload-bytes", strconv.Itoa(8 << 20), "--batch-size", strconv.Itoa(c.BatchSize), "--lease-ttl", "1s",
		"--max-poll", "50ms", "--retry-base", "20ms", "--retry-cap", "200ms"}, more...)
	return relaytest.StartRelay(t, c.db.URL, args...)
}

// Run kills Kills relays, each while a delivery is in flight (still
// pending in the outbox), and has another send every message Hook
// expects. It checks that each was delivered at least once with its
// bytes and is sent, that the ones in flight at a kill were delivered
// again, that no delivery was of an unknown message or wrong bytes and
// that none went dead.
func (c *Crash) Run(t *testing.T) {
	t.Helper()
	ids := c.Hook.Expected()
	for k := range c.Kills {
		left := len(ids) - relaytest.Count(t, c.db, "sent")
		held, free := c.Hook.Arm(t, min(c.Hold, left))
		relay := c.startRelay(t, fmt.Sprintf("crash-%d", k))
		var id string
		select {
		case id = <-held:
		case <-time.After(3 * time.Minute):
			t.Fatalf("kill %d: no delivery held within 3 minutes; relay log:\n%s", k+1, relay.Log())
		}
		if st, _ := c.status(t, id); st != "pending" {
			t.Fatalf("kill %d: message %s is %s while its publish is unanswered", k+1, id, st)
		}
		relay.Kill()
		free()
		t.Logf("%s: kill %d with %s in flight, %d of %d sent", c.db.Dialect, k+1, id, relaytest.Count(t, c.db, "sent"), len(ids))
	}
	relay := c.startRelay(t, "crash-last")
	relaytest.WaitFor(t, 3*time.Minute, "every message sent", func() bool { return relaytest.Count(t, c.db, "sent") == len(ids) })
	relay.Stop(t)

	for _, b := range c.Hook.Mistakes() {
		t.Error(b)
	}
	for _, id := range ids {
		if ok, _ := c.Hook.Delivered(id); ok == 0 {
			t.Errorf("message %s never delivered with its bytes", id)
		}
		if st, le := c.status(t, id); st != "sent" {
			t.Errorf("message %s is %s (%q)", id, st, le)
		}
	}
	// Each held delivery was never answered, so its message went again.
	_, total := c.Hook.Delivered("")
	if total < len(ids)+c.Kills {
		t.Errorf("%d deliveries, want at least %d: a message in flight at a kill was not delivered again", total, len(ids)+c.Kills)
	}
	if n := relaytest.Count(t, c.db, "dead"); n != 0 {
		t.Errorf("%d dead", n)
	}
	t.Logf("%s: %d messages, %d kills, %d deliveries", c.db.Dialect, len(ids), c.Kills, total)
}

// status is the status and last_error of message id.
func (c *Crash) status(t *testing.T, id string) (status, lastErr string) {
	t.Helper()
	var le sql.NullString
	q := testdb.Placeholder(c.db.Dialect, "SELECT status, last_error FROM outbox_messages WHERE message_id = ?")
	if err := c.db.SQL.QueryRowContext(context.Background(), q, id).Scan(&status, &le); err != nil {
		t.Fatalf("the status of message %s: %v", id, err)
	}
	return status, le.String
}

// Retain runs a relay with retention of a tiny age until it has removed
// the rows of the messages Hook expects, all sent, leaving the others.
// The relay keeps blobs for its default grace of an hour, so a test
// sweeps them itself with a short one.
func (c *Crash) Retain(t *testing.T) {
	t.Helper()
	left := c.db.Count(t, "SELECT count(*) FROM outbox_messages") - len(c.Hook.Expected())
	relay := c.startRelay(t, "retention", "--retention-sent", "1ms", "--retention-interval", "50ms")
	relaytest.WaitFor(t, 2*time.Minute, "the delivered rows removed", func() bool {
		return c.db.Count(t, "SELECT count(*) FROM outbox_messages") == left
	})
	relay.Stop(t)
}
