package inbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
	"github.com/txoutbox/outbox/webhooksig"
)

// TestWebhookCloudEventsDedupe: the same message delivered on the plain
// wire, as a binary CloudEvent and as a structured one is applied once,
// since every format decodes to the same message id; each delivery's
// decoded message has the plain wire's fields.
func TestWebhookCloudEventsDedupe(t *testing.T) {
	db := testdb.New(t, store.SQLite)
	db.Exec(t, "CREATE TABLE effects (message_id TEXT NOT NULL, topic TEXT, msg_key TEXT, payload TEXT)")
	ib, err := inbox.New(db.Std, &inbox.Config{Consumer: "ce-hooks"})
	if err != nil {
		t.Fatal(err)
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a shared secret of 32 bytes!!!!!"))
	var seen []*inbox.Message
	h, err := inbox.WebhookHandler(ib, &inbox.WebhookConfig{Secret: secret}, func(ctx context.Context, tx *sql.Tx, m *inbox.Message) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO effects VALUES (?, ?, ?, ?)", m.ID, m.Topic, m.Key, string(m.Payload))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		if m, err := inbox.DecodeHTTP(r.Header, body.Bytes()); err == nil {
			seen = append(seen, m)
		}
		r.Body = io.NopCloser(bytes.NewReader(body.Bytes()))
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	env := &outbox.Envelope{ID: "0192f0c4-3a6e-7cc4-9a3b-1f2e3d4c5b6b", Topic: "order.created", Key: "order 42 – ü", Payload: []byte(`{"id": 1}`), Attempt: 1,
		CreatedAt: time.Now(), Headers: map[string]string{publisher.HeaderTopic: "order.created", publisher.HeaderBusinessKey: "order 42 – ü", publisher.HeaderContentType: "application/json"}}
	for _, f := range []*outboxce.Format{nil, {Mode: outboxce.Binary}, {Mode: outboxce.Structured, Source: "/orders"}} {
		pub, err := outboxwebhook.New(srv.URL, &outboxwebhook.Config{Secret: secret, CloudEvents: f})
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(context.Background(), []*outbox.Envelope{env})[0]; err != nil {
			t.Fatalf("format %s: %v", f, err)
		}
		_ = pub.Close()
	}
	if n := db.Count(t, "SELECT count(*) FROM effects"); n != 1 {
		t.Errorf("%d effects after the same message in three formats, want 1", n)
	}
	if len(seen) != 3 {
		t.Fatalf("%d deliveries decoded, want 3", len(seen))
	}
	for i, m := range seen {
		if m.ID != env.ID || m.Topic != env.Topic || m.Key != env.Key || m.ContentType != "application/json" || string(m.Payload) != string(env.Payload) ||
			m.Headers[publisher.HeaderBusinessKey] != env.Key {
			t.Errorf("delivery %d decoded as %+v", i, m)
		}
	}
}

// TestDecodeHTTPRefusesBadEvents: a CloudEvent that cannot be read is a
// 400 from WebhookHandler, with the reason, and the handler never runs.
func TestDecodeHTTPRefusesBadEvents(t *testing.T) {
	db := testdb.New(t, store.SQLite)
	ib, err := inbox.New(db.Std, &inbox.Config{Consumer: "ce-bad"})
	if err != nil {
		t.Fatal(err)
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret of 32 bytes!!!!!!"))
	h, err := inbox.WebhookHandler(ib, &inbox.WebhookConfig{Secret: secret}, func(context.Context, *sql.Tx, *inbox.Message) error {
		t.Error("handler ran for a bad event")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := webhooksig.ParseSecret(secret)
	for name, c := range map[string]struct {
		header map[string]string
		body   string
		says   string
	}{
		"structured without specversion": {map[string]string{"Content-Type": "application/cloudevents+json"}, `{"id":"x","type":"t"}`, "not a CloudEvent"},
		"binary without id":              {map[string]string{"Ce-Specversion": "1.0", "Ce-Type": "t"}, `{}`, "without id"},
		"binary of another version":      {map[string]string{"Ce-Specversion": "0.3", "Ce-Id": "x", "Ce-Type": "t"}, `{}`, "specversion"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(c.body))
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		ts := strconvUnix(time.Now())
		req.Header.Set(webhooksig.HeaderID, "msg-1")
		req.Header.Set(webhooksig.HeaderTimestamp, ts)
		req.Header.Set(webhooksig.HeaderSignature, webhooksig.Sign(key, "msg-1", ts, []byte(c.body)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), c.says) {
			t.Errorf("%s: %d %q, want 400 saying %q", name, w.Code, w.Body.String(), c.says)
		}
	}
}

func strconvUnix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
