package inbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
)

// TestWebhookReceiver drives the receiver with the real webhook publisher
// and with hand-made requests.
func TestWebhookReceiver(t *testing.T) {
	db := testdb.New(t, store.SQLite)
	db.Exec(t, "CREATE TABLE effects (message_id TEXT NOT NULL, topic TEXT, trace TEXT)")
	ib, err := inbox.New(db.Std, &inbox.Config{Consumer: "hooks"})
	if err != nil {
		t.Fatal(err)
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a shared secret of 32 bytes!!!!!"))
	var fail atomic.Bool
	h, err := inbox.WebhookHandler(ib, &inbox.WebhookConfig{Secret: secret}, func(ctx context.Context, tx *sql.Tx, m *inbox.Message) error {
		if fail.Load() {
			return errors.New("database busy")
		}
		sc := trace.SpanContextFromContext(ctx)
		_, err := tx.ExecContext(ctx, "INSERT INTO effects VALUES (?, ?, ?)", m.ID, m.Topic, sc.TraceID().String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	pub, err := outboxwebhook.New(srv.URL, &outboxwebhook.Config{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	env := &outbox.Envelope{ID: "0192f0c4-3a6e-7cc4-9a3b-1f2e3d4c5b6a", Topic: "order.created", Payload: []byte(`{"id":1}`), Attempt: 1,
		Headers: map[string]string{publisher.HeaderTopic: "order.created", publisher.HeaderContentType: "application/json", publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	publish := func() error { return pub.Publish(context.Background(), []*outbox.Envelope{env})[0] }

	// A failing handler: 500, nothing recorded, the relay would retry.
	fail.Store(true)
	if err := publish(); err == nil || publisher.Classify(err) == publisher.ClassPermanent {
		t.Fatalf("handler failure should be a retryable error, got %v", err)
	}
	fail.Store(false)
	// Valid, then replayed: applied once.
	for i := 0; i < 3; i++ {
		if err := publish(); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM effects"); n != 1 {
		t.Fatalf("%d effects after a failure and three deliveries", n)
	}
	var tr string
	_ = db.SQL.QueryRow("SELECT trace FROM effects").Scan(&tr)
	if tr != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("trace context not restored: %q", tr)
	}

	// Hand-made requests for the refusals.
	sign := func(id string, ts time.Time, body []byte, sec string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("webhook-signature", "v1,"+signature(t, sec, id, ts, body))
		return req
	}
	body := []byte(`{"id":2}`)
	cases := []struct {
		name string
		req  *http.Request
		want int
	}{
		{"valid", sign("id-valid", time.Now(), body, secret), http.StatusNoContent},
		{"tampered body", tamper(sign("id-tampered", time.Now(), body, secret)), http.StatusUnauthorized},
		{"wrong secret", sign("id-wrong", time.Now(), body, "whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret"))), http.StatusUnauthorized},
		{"stale timestamp", sign("id-stale", time.Now().Add(-10*time.Minute), body, secret), http.StatusBadRequest},
		{"replayed id", sign("id-valid", time.Now(), body, secret), http.StatusNoContent},
	}
	for _, c := range cases {
		resp, err := http.DefaultClient.Do(c.req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM effects WHERE message_id = 'id-valid'"); n != 1 {
		t.Fatalf("valid+replayed: %d effects", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM effects WHERE message_id IN ('id-tampered', 'id-wrong', 'id-stale')"); n != 0 {
		t.Fatalf("%d effects from refused requests", n)
	}
	if _, err := inbox.WebhookHandler(ib, &inbox.WebhookConfig{Secret: "whsec_***"}, func(context.Context, *sql.Tx, *inbox.Message) error { return nil }); err == nil {
		t.Fatal("bad secret accepted")
	}
}

func tamper(r *http.Request) *http.Request {
	r2, _ := http.NewRequest(r.Method, r.URL.String(), bytes.NewReader([]byte(`{"id":999}`)))
	r2.Header = r.Header
	return r2
}
