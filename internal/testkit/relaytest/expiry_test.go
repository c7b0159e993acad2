package relaytest_test

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestExpiredNeverSent: on a route whose destination answers 503 until
// every message with an expiry 2 s ahead has expired, those messages (the
// head of each of 5 keys, and 3 without a key) expire and are never
// delivered; after the recovery the later message of each key is
// delivered. A row written by plain SQL with an expiry already past is
// never even tried. A requeued expired message is delivered.
func TestExpiredNeverSent(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	var up, stale atomic.Bool
	rec, url := newReceiver(t, func(body string) (int, http.Header) {
		if strings.Contains(body, "stale") {
			stale.Store(true)
		}
		if up.Load() {
			return http.StatusOK, nil
		}
		return http.StatusServiceUnavailable, nil
	})
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, expires_at) VALUES ('order.stale', '{"stale":true}', now() - interval '1 second')`)
	p := relaytest.StartRelay(t, db.URL, "--to", url, "--retry-schedule", "200ms", "--probe-interval", "25ms")
	relaytest.WaitFor(t, time.Minute, "the relay holding its partitions", func() bool { return p.Logged("partitions changed") > 0 })
	expires := time.Now().Add(2 * time.Second)
	var msgs []outbox.Message
	for k := range 5 {
		key := fmt.Sprintf("k%d", k)
		msgs = append(msgs,
			outbox.Message{Topic: "order.created", Key: key, Payload: fmt.Appendf(nil, `{"key":%q,"n":1}`, key), ExpiresAt: expires},
			outbox.Message{Topic: "order.created", Key: key, Payload: fmt.Appendf(nil, `{"key":%q,"n":2}`, key)})
	}
	for i := range 3 {
		msgs = append(msgs, outbox.Message{Topic: "order.created", Payload: fmt.Appendf(nil, `{"free":%d}`, i), ExpiresAt: expires})
	}
	ids, err := e.Enqueue(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, time.Minute, "the plain-SQL row and the 8 messages expired", func() bool {
		return relaytest.Count(t, db, store.StatusExpired) == 9
	})
	up.Store(true)
	relaytest.WaitFor(t, time.Minute, "the 5 later messages sent", func() bool {
		return relaytest.Count(t, db, store.StatusSent) == 5
	})
	delivered := func(id string) bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		_, ok := rec.delivered[id]
		return ok
	}
	for i, id := range ids {
		if expiring := !msgs[i].ExpiresAt.IsZero(); expiring == delivered(id) {
			t.Errorf("message %d (%s): delivered %v, expiring %v", i, msgs[i].Payload, !expiring, expiring)
		}
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'expired' AND last_error LIKE 'expired: its expires_at came before it was delivered%'`); n != 9 {
		t.Fatalf("%d expired messages with the reason, want 9", n)
	}
	if stale.Load() {
		t.Fatal("the plain-SQL row that had expired was sent")
	}
	// Requeued, an expired message goes out.
	out, err := exec.Command(p.Bin(), "dead", "requeue", "--db", db.URL, "--expired", "--id", ids[0]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "requeued 1 expired message") {
		t.Fatalf("requeue: %v: %s", err, out)
	}
	relaytest.WaitFor(t, time.Minute, "the requeued message delivered", func() bool { return delivered(ids[0]) })
	p.Stop(t)
	if p.Logged("messages expired") == 0 {
		t.Fatal("no expiry logged")
	}
}
