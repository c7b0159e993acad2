package relaytest_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/seal"
)

// keyFile makes a key file with one key, k1, and opens it.
func keyFile(t *testing.T) *seal.FileKeys {
	t.Helper()
	return relaytest.KeyFile(t)
}

// produce commits msgs through a Producer with cfg over db, whatever its
// dialect, and returns their ids.
func produce(t *testing.T, db *testdb.DB, cfg *outbox.Config, msgs ...outbox.Message) []string {
	t.Helper()
	ids, err := enqueueTx(t, db, cfg, true, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// lastError is the status and last_error of the message id.
func lastError(t *testing.T, db *testdb.DB, id string) (status, lastErr string, attempts int) {
	t.Helper()
	var le sql.NullString
	q := testdb.Placeholder(db.Dialect, "SELECT status, last_error, attempts FROM outbox_messages WHERE message_id = ?")
	if err := db.SQL.QueryRowContext(context.Background(), q, id).Scan(&status, &le, &attempts); err != nil {
		t.Fatal(err)
	}
	return status, le.String, attempts
}

// wantDead checks that each message of dead is dead with its reason as
// last_error and was never published to rec, and that sent messages were
// sent.
func wantDead(t *testing.T, db *testdb.DB, rec *recorder, dead map[string]string, sent int) {
	t.Helper()
	for id, want := range dead {
		if st, le, _ := lastError(t, db, id); st != store.StatusDead || le != want {
			t.Errorf("%s: %s %q, want dead %q", id, st, le, want)
		}
		if _, ok := rec.envelope(id); ok {
			t.Errorf("%s was published", id)
		}
	}
	if n := relaytest.Count(t, db, "sent"); n != sent {
		t.Errorf("%d sent, want %d", n, sent)
	}
}

// TestSealedRoundTrip: payloads sealed at enqueue are stored without
// their plain text on every database; a route that opens them publishes
// the plain payload byte for byte, one that passes them publishes them
// sealed with their key id and the consumer opens them; a sealed payload
// tampered with by plain SQL, one under a key the relay does not know and
// one copied to another row go dead with the reason, the others flow.
func TestSealedRoundTrip(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t, d)
			keys := keyFile(t)
			cfg := &outbox.Config{Seal: &outbox.SealConfig{Keys: keys, Topics: []string{"secret.>", "e2e.>"}, Headers: []string{"X-Email"}}}
			openJSON := []byte(`{"email":"alice@example.com","token":"s3cr3t"}`)
			binary := []byte("\x00\xffbinary bob@example.com")
			ids := produce(t, db, cfg,
				outbox.Message{Topic: "secret.open", Key: "a", Payload: openJSON, Headers: map[string]string{"x-email": "alice@example.com", "x-tenant": "acme"}},
				outbox.Message{Topic: "e2e.pass", Key: "b", Payload: binary, ContentType: "application/octet-stream", Headers: map[string]string{"x-email": "bob@example.com"}},
				outbox.Message{Topic: "plain.x", Payload: []byte(`{"plain":true}`)},
				outbox.Message{Topic: "secret.subject", Payload: []byte(`{"who":"carol@example.com"}`), SealSubject: "customer:1"},
				outbox.Message{Topic: "secret.tampered", Payload: []byte(`{"n":1}`)},
				outbox.Message{Topic: "secret.unknown", Payload: []byte(`{"n":2}`)},
				outbox.Message{Topic: "secret.moved", Payload: []byte(`{"n":3}`)},
			)
			for _, p := range db.Strings(t, "SELECT payload FROM outbox_messages") {
				if strings.Contains(p, "example.com") || strings.Contains(p, "s3cr3t") {
					t.Fatalf("the table holds a plain payload: %q", p)
				}
			}
			for _, h := range db.Strings(t, "SELECT headers FROM outbox_messages") {
				if strings.Contains(h, "example.com") {
					t.Fatalf("the table holds a plain header: %q", h)
				}
			}
			var h map[string]string
			hs := db.Strings(t, testdb.Placeholder(d, "SELECT headers FROM outbox_messages WHERE message_id = ?"), ids[0])
			if err := json.Unmarshal([]byte(hs[0]), &h); err != nil || h[seal.HeaderAlgorithm] != "aes-256-gcm" || h[seal.HeaderKeyID] != "k1" {
				t.Fatalf("headers %s", hs[0])
			}
			// Plain SQL: flip a character of one payload, name an unknown
			// key in another, copy a third's payload over a fourth's.
			db.Exec(t, testdb.Placeholder(d, "UPDATE outbox_messages SET payload = ? WHERE message_id = ?"),
				flip(db.Strings(t, testdb.Placeholder(d, "SELECT payload FROM outbox_messages WHERE message_id = ?"), ids[4])[0]), ids[4])
			db.Exec(t, testdb.Placeholder(d, "UPDATE outbox_messages SET headers = ? WHERE message_id = ?"),
				`{"content-type":"application/json","outbox-seal":"aes-256-gcm","outbox-seal-key":"k9"}`, ids[5])
			db.Exec(t, testdb.Placeholder(d, "UPDATE outbox_messages SET payload = ? WHERE message_id = ?"),
				db.Strings(t, testdb.Placeholder(d, "SELECT payload FROM outbox_messages WHERE message_id = ?"), ids[0])[0], ids[6])

			rec := newRecorder()
			rc := relaytest.Config(rec)
			rc.Keys = keys
			rc.Routes = []outbox.Route{{Pattern: "e2e.>", Publisher: rec, Sealed: outbox.SealedPass}, {Pattern: "*", Publisher: rec, Sealed: outbox.SealedOpen}}
			relaytest.Start(t, db, rc)
			relaytest.WaitFor(t, 20*time.Second, "every message settled", func() bool { return relaytest.Count(t, db, "pending") == 0 })

			e, ok := rec.envelope(ids[0])
			if !ok || !bytes.Equal(e.Payload, openJSON) {
				t.Errorf("opened payload %q, want %q", e.Payload, openJSON)
			}
			if _, sealed := e.Headers[seal.HeaderAlgorithm]; sealed || e.Headers[publisher.HeaderContentType] != "application/json" ||
				e.Headers["x-email"] != "alice@example.com" || e.Headers["x-tenant"] != "acme" {
				t.Errorf("opened message headers %v", e.Headers)
			}
			if e, _ := rec.envelope(ids[3]); string(e.Payload) != `{"who":"carol@example.com"}` {
				t.Errorf("subject-sealed payload %q", e.Payload)
			}
			if e, _ := rec.envelope(ids[2]); string(e.Payload) != `{"plain":true}` {
				t.Errorf("plain payload %q", e.Payload)
			}
			// End to end: sealed on the wire, opened by the consumer.
			e, ok = rec.envelope(ids[1])
			if !ok || bytes.Contains(e.Payload, []byte("bob@")) || e.Headers[seal.HeaderKeyID] != "k1" || e.Headers[seal.HeaderAlgorithm] != "aes-256-gcm" {
				t.Fatalf("passed message: %q %v", e.Payload, e.Headers)
			}
			m := &inbox.Message{ID: e.ID, Topic: e.Topic, Headers: e.Headers, Payload: e.Payload}
			if err := m.Open(ctx, keys); err != nil || !bytes.Equal(m.Payload, binary) {
				t.Errorf("inbox Open: %q, %v", m.Payload, err)
			}
			if _, sealed := m.Headers[seal.HeaderAlgorithm]; sealed || m.Headers["x-email"] != "bob@example.com" {
				t.Errorf("the opened message's headers: %v", m.Headers)
			}
			wantDead(t, db, rec, map[string]string{
				ids[4]: "cannot open sealed payload: message authentication failed",
				ids[5]: "cannot open sealed payload: unknown key k9",
				ids[6]: "cannot open sealed payload: message authentication failed",
			}, 4)
		})
	}
}

// flip changes one character of a base64 text in the middle.
func flip(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestSealedRotation: keys rotated while messages flow leave nothing dead.
func TestSealedRotation(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	keys := keyFile(t)
	cfg := &outbox.Config{Seal: &outbox.SealConfig{Keys: keys}}
	rec := newRecorder()
	rc := relaytest.Config(rec)
	rc.Keys = keys
	relaytest.Start(t, db, rc)

	var ids []string
	for i := range 40 {
		if i == 20 {
			if _, err := seal.CreateKey(keys.Path(), "", true); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, produce(t, db, cfg, outbox.Message{Topic: "rotate.x", Key: "k", Payload: []byte(`{"i":1}`)})...)
	}
	relaytest.WaitFor(t, 20*time.Second, "40 sent", func() bool { return relaytest.Count(t, db, "sent") == 40 })
	if n := relaytest.Count(t, db, "dead"); n != 0 {
		t.Fatalf("%d dead after a rotation", n)
	}
	if e, _ := rec.envelope(ids[39]); string(e.Payload) != `{"i":1}` {
		t.Errorf("after rotation: %q", e.Payload)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE headers::jsonb->>'outbox-seal-key' = 'k2'`); n != 20 {
		t.Errorf("%d messages under k2, want 20", n)
	}

}

// hookRecorder is a webhook receiver keeping each delivery, decoded as
// the inbox decodes it.
type hookRecorder struct {
	mu  sync.Mutex
	got map[string]*inbox.Message
}

func (h *hookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, err := inbox.DecodeHTTP(r.Header, body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.got[m.ID] = m
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (h *hookRecorder) message(id string) *inbox.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[id]
}

// TestSealedWebhookCLI: `outbox relay --keys FILE` with a route that
// passes sealed payloads (the URL option sealed=pass) and one that opens
// them: the webhook receives the sealed payload and opens it with the
// consumer's keys, and the plain one byte for byte; `outbox keys`
// rotates and lists without printing key material; a route that opens
// sealed payloads without keys is refused at start with exit 2.
func TestSealedWebhookCLI(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t, store.Postgres)
	keys := keyFile(t)
	h := &hookRecorder{got: map[string]*inbox.Message{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p := relaytest.StartRelay(t, db.URL, "--keys", keys.Path(), "--route", "e2e.>="+srv.URL+"/e2e?sealed=pass", "--to", srv.URL+"/open", "--max-poll", "50ms")
	out, err := exec.Command(p.Bin(), "keys", "rotate", "--keys", keys.Path()).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "k2" {
		t.Fatalf("keys rotate: %s %v", out, err)
	}
	cfg := &outbox.Config{Seal: &outbox.SealConfig{Keys: keys}}
	plain := []byte(`{"email":"dave@example.com"}`)
	ids := produce(t, db, cfg, outbox.Message{Topic: "e2e.x", Payload: plain}, outbox.Message{Topic: "open.x", Payload: plain})
	out, err = exec.Command(p.Bin(), "enqueue", "--db", db.URL, "--topic", "open.cli", "--payload", `{"cli":"frank@example.com"}`,
		"--seal-subject", "customer:9", "--keys", keys.Path()).CombinedOutput()
	if err != nil {
		t.Fatalf("enqueue --seal-subject: %s %v", out, err)
	}
	cliID := strings.TrimSpace(string(out))
	if stored := db.Strings(t, "SELECT payload FROM outbox_messages WHERE message_id = $1", cliID); len(stored) != 1 || strings.Contains(stored[0], "frank") {
		t.Errorf("enqueue --seal-subject stored %q", stored)
	}
	relaytest.WaitFor(t, 20*time.Second, "all three delivered", func() bool {
		return h.message(ids[0]) != nil && h.message(ids[1]) != nil && h.message(cliID) != nil
	})
	if m := h.message(cliID); string(m.Payload) != `{"cli":"frank@example.com"}` {
		t.Errorf("enqueued by the command: %q", m.Payload)
	}
	m := h.message(ids[0])
	if bytes.Contains(m.Payload, []byte("dave")) || m.Headers[seal.HeaderKeyID] != "k2" {
		t.Fatalf("passed on: %q %v", m.Payload, m.Headers)
	}
	if err := m.Open(ctx, keys); err != nil || !bytes.Equal(m.Payload, plain) {
		t.Errorf("consumer opened %q, %v", m.Payload, err)
	}
	if m := h.message(ids[1]); !bytes.Equal(m.Payload, plain) || m.ContentType != "application/json" {
		t.Errorf("opened: %q %s", m.Payload, m.ContentType)
	}
	b, _ := os.ReadFile(keys.Path())
	var doc struct {
		Keys []struct{ Secret string }
	}
	_ = json.Unmarshal(b, &doc)
	out, err = exec.Command(p.Bin(), "keys", "list", "--keys", keys.Path()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "k2") {
		t.Fatalf("keys list: %s %v", out, err)
	}
	for _, k := range doc.Keys {
		if strings.Contains(string(out), k.Secret) || strings.Contains(p.Log(), k.Secret) {
			t.Error("key material printed or logged")
		}
	}
	cmd := exec.Command(p.Bin(), "relay", "--db", db.URL, "--to", srv.URL+"?sealed=open")
	cmd.Env = append(os.Environ(), "OUTBOX_KEYS_FILE=")
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "sealed=open") {
		t.Errorf("sealed=open without keys: %v %s", err, out)
	}
}

// TestSealedErasure: on every database, erasing a data subject's key with
// `outbox keys erase` while a relay process runs makes that subject's
// pending messages dead as erased, charged nothing and never published,
// while another subject's are sent; `outbox replay --keys` skips the
// erased subject's sent message and says how many it skipped.
func TestSealedErasure(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			keys := keyFile(t)
			h := &hookRecorder{got: map[string]*inbox.Message{}}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			p := relaytest.StartRelay(t, db.URL, "--keys", keys.Path(), "--to", srv.URL, "--max-poll", "50ms")
			cfg := &outbox.Config{Seal: &outbox.SealConfig{Keys: keys}}
			sent := produce(t, db, cfg,
				outbox.Message{Topic: "erase.x", Payload: []byte(`{"c":1}`), SealSubject: "customer:1"},
				outbox.Message{Topic: "erase.x", Payload: []byte(`{"c":2}`), SealSubject: "customer:2"})
			relaytest.WaitFor(t, 20*time.Second, "the first two sent", func() bool { return relaytest.Count(t, db, "sent") == 2 })
			later := time.Now().Add(1500 * time.Millisecond)
			pending := produce(t, db, cfg,
				outbox.Message{Topic: "erase.x", Payload: []byte(`{"c":1}`), SealSubject: "customer:1", NotBefore: later},
				outbox.Message{Topic: "erase.x", Payload: []byte(`{"c":1}`), SealSubject: "customer:1", NotBefore: later},
				outbox.Message{Topic: "erase.x", Payload: []byte(`{"c":2}`), SealSubject: "customer:2", NotBefore: later})
			if out, err := exec.Command(p.Bin(), "keys", "erase", "--keys", keys.Path(), "customer:1").CombinedOutput(); err != nil {
				t.Fatalf("keys erase: %s %v", out, err)
			}
			relaytest.WaitFor(t, 20*time.Second, "the delayed messages settled", func() bool { return relaytest.Count(t, db, "pending") == 0 })
			for _, id := range pending[:2] {
				st, le, attempts := lastError(t, db, id)
				if st != "dead" || le != "erased: key customer:1 no longer exists" || attempts != 0 {
					t.Errorf("%s: %s %q attempts %d, want dead erased uncharged", id, st, le, attempts)
				}
				if h.message(id) != nil {
					t.Errorf("%s was published", id)
				}
			}
			if st, _, _ := lastError(t, db, pending[2]); st != "sent" {
				t.Errorf("customer:2's delayed message is %s", st)
			}
			for _, id := range sent {
				if st, _, _ := lastError(t, db, id); st != "sent" {
					t.Errorf("sent message %s is %s", id, st)
				}
			}
			out, err := exec.Command(p.Bin(), "replay", "--db", db.URL, "--all", "--keys", keys.Path()).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "skipped 1 message sealed under erased keys") || !strings.Contains(string(out), "replayed 2 ") {
				t.Errorf("replay: %s %v", out, err)
			}
			relaytest.WaitFor(t, 20*time.Second, "the replayed messages sent again", func() bool { return relaytest.Count(t, db, "sent") == 3 })
			if n := relaytest.Count(t, db, "dead"); n != 2 {
				t.Errorf("%d dead after the replay, want 2", n)
			}
		})
	}
}
