package relaytest_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/seal"
)

// countHook is a webhook receiver counting each message's deliveries and
// keeping its last payload.
type countHook struct {
	mu   sync.Mutex
	n    map[string]int
	last map[string][]byte
}

func (h *countHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, err := inbox.DecodeHTTP(r.Header, body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.n[m.ID]++
	h.last[m.ID] = m.Payload
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// got is how many times message id was delivered, and its last payload.
func (h *countHook) got(id string) (int, []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[id], h.last[id]
}

// statusOf is the status of message id in outbox_messages, or in the
// archive (archived true), or "" when it is in neither.
func statusOf(t *testing.T, db *testdb.DB, id string) (status string, archived bool) {
	t.Helper()
	for _, table := range []string{"outbox_messages", "outbox_messages_archive"} {
		q := testdb.Placeholder(db.Dialect, "SELECT status FROM "+table+" WHERE message_id = ?")
		err := db.SQL.QueryRowContext(context.Background(), q, id).Scan(&status)
		if err == nil {
			return status, table != "outbox_messages"
		}
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
	}
	return "", false
}

// TestSealedErasureAtScale: with retention archiving sent messages,
// `outbox keys erase customer:1` against a running relay process makes
// all 100 of customer:1's pending messages dead as erased, uncharged and
// never published, while customer:2's are sent; `outbox replay --all
// --archive --keys` skips the 100 archived messages of customer:1, says
// so, and replays customer:2's, which are delivered again; the archived
// payloads of customer:1 no longer open, customer:2's still do.
func TestSealedErasureAtScale(t *testing.T) {
	relaytest.KeepBinary(t)
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			testSealedErasureAtScale(t, d)
		})
	}
}

func testSealedErasureAtScale(t *testing.T, d store.Dialect) {
	const (
		erased = 100 // customer:1's messages in each state
		kept   = 20  // customer:2's
	)
	ctx := context.Background()
	db := testdb.New(t, d)
	keys := keyFile(t)
	h := &countHook{n: map[string]int{}, last: map[string][]byte{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p := relaytest.StartRelay(t, db.URL, "--keys", keys.Path(), "--to", srv.URL, "--max-poll", "50ms",
		"--archive", "--retention-sent", "1ms", "--retention-interval", "50ms")
	cfg := &outbox.Config{Seal: &outbox.SealConfig{Keys: keys}}
	plain := map[string][]byte{}
	batch := func(subject string, n int, notBefore time.Time) []string {
		msgs := make([]outbox.Message, n)
		for i := range msgs {
			msgs[i] = outbox.Message{Topic: "erase.scale", Key: subject, SealSubject: subject, NotBefore: notBefore,
				Payload: fmt.Appendf(nil, `{"subject":%q,"n":%d,"due":%q}`, subject, i, notBefore.Format(time.RFC3339Nano))}
		}
		ids := produce(t, db, cfg, msgs...)
		for i, id := range ids {
			plain[id] = msgs[i].Payload
		}
		return ids
	}
	sent1, sent2 := batch("customer:1", erased, time.Time{}), batch("customer:2", kept, time.Time{})
	relaytest.WaitFor(t, 2*time.Minute, "the first messages sent and archived", func() bool {
		return db.Count(t, "SELECT count(*) FROM outbox_messages_archive") == erased+kept &&
			db.Count(t, "SELECT count(*) FROM outbox_messages") == 0
	})

	// Due in an hour, so that none is due before the erasure; once the
	// key is gone they are made due by hand, and the running relay takes
	// them with the key file as it is then.
	later := time.Now().Add(time.Hour)
	pending1, pending2 := batch("customer:1", erased, later), batch("customer:2", kept, later)
	if out, err := exec.Command(p.Bin(), "keys", "erase", "--keys", keys.Path(), "customer:1").CombinedOutput(); err != nil {
		t.Fatalf("keys erase: %s %v", out, err)
	}
	if n := db.Exec(t, "UPDATE outbox_messages SET available_at = "+testdb.Ago(d, 0)+" WHERE status = 'pending'"); n != erased+kept {
		t.Fatalf("made %d messages due, want %d", n, erased+kept)
	}
	relaytest.WaitFor(t, 2*time.Minute, "the delayed messages settled and customer:2's archived", func() bool {
		return relaytest.Count(t, db, "pending") == 0 && db.Count(t, "SELECT count(*) FROM outbox_messages_archive") == erased+2*kept
	})
	for _, id := range pending1 {
		st, le, attempts := lastError(t, db, id)
		if st != "dead" || le != "erased: key customer:1 no longer exists" || attempts != 0 {
			t.Errorf("%s: %s %q attempts %d, want dead erased uncharged", id, st, le, attempts)
		}
		if n, _ := h.got(id); n != 0 {
			t.Errorf("customer:1's pending %s was published %d times after the erasure", id, n)
		}
	}
	for _, id := range pending2 {
		if st, archived := statusOf(t, db, id); st != "sent" || !archived {
			t.Errorf("customer:2's delayed %s: %q (archived %v), want sent and archived", id, st, archived)
		}
	}
	for _, id := range append(append([]string{}, sent1...), sent2...) {
		if st, archived := statusOf(t, db, id); st != "sent" || !archived {
			t.Errorf("sent %s: %q (archived %v), want sent and archived", id, st, archived)
		}
	}

	// Every sent message is in the archive now: customer:1's no longer
	// open, customer:2's do.
	fresh, err := seal.OpenFileKeys(keys.Path())
	if err != nil {
		t.Fatal(err)
	}
	archived := archivedRows(t, db)
	if len(archived) != erased+2*kept {
		t.Fatalf("%d archived rows, want %d", len(archived), erased+2*kept)
	}
	replayed := append(append([]string{}, sent2...), pending2...)
	for _, id := range sent1 {
		r := archived[id]
		if got, hidden, err := seal.OpenMessage(ctx, fresh, id, r.headers, r.payload); !errors.Is(err, seal.ErrErased) || got != nil || hidden != nil {
			t.Errorf("customer:1's archived %s opened after the erasure: %q %v, %v (want seal.ErrErased)", id, got, hidden, err)
		}
	}
	for _, id := range replayed {
		r := archived[id]
		if got, _, err := seal.OpenMessage(ctx, fresh, id, r.headers, r.payload); err != nil || !bytes.Equal(got, plain[id]) {
			t.Errorf("customer:2's archived %s: %q, %v", id, got, err)
		}
	}

	out, err := exec.Command(p.Bin(), "replay", "--db", db.URL, "--all", "--archive", "--keys", keys.Path()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("skipped %d messages sealed under erased keys", erased)) ||
		!strings.Contains(string(out), fmt.Sprintf("replayed %d ", 2*kept)) {
		t.Errorf("replay: %s %v", out, err)
	}
	relaytest.WaitFor(t, 2*time.Minute, "customer:2's messages delivered again", func() bool {
		for _, id := range replayed {
			if n, _ := h.got(id); n < 2 {
				return false
			}
		}
		return relaytest.Count(t, db, "pending") == 0
	})
	for _, id := range replayed {
		if _, payload := h.got(id); !bytes.Equal(payload, plain[id]) {
			t.Errorf("customer:2's %s delivered again as %q, want %q", id, payload, plain[id])
		}
		if st, _ := statusOf(t, db, id); st != "sent" {
			t.Errorf("customer:2's replayed %s is %q", id, st)
		}
	}
	for _, id := range sent1 {
		if n, payload := h.got(id); n != 1 || !bytes.Equal(payload, plain[id]) {
			t.Errorf("customer:1's %s: %d deliveries (want the one before the erasure), last %q", id, n, payload)
		}
		if st, archived := statusOf(t, db, id); st != "sent" || !archived {
			t.Errorf("customer:1's %s after the replay: %q (archived %v), want left in the archive", id, st, archived)
		}
	}
	if n := relaytest.Count(t, db, "dead"); n != erased {
		t.Errorf("%d dead after the replay, want %d", n, erased)
	}
}
