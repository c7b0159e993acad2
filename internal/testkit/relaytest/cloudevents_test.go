package relaytest_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestRelayCloudEventsConfig: an `outbox relay` process whose config-file
// route says format: cloudevents-structured and ce_source delivers every
// message, signed, to inbox.WebhookHandler, which reads each structured
// event back into its message (id, topic, key) and applies it once.
func TestRelayCloudEventsConfig(t *testing.T) {
	const n = 30
	db := testdb.New(t, store.Postgres)
	ib := relaytest.Effects(t, db, "ce-config")
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a secret for the cloudevents test"))
	var mu sync.Mutex
	keys := map[string]string{}
	h, err := inbox.WebhookHandler(ib, &inbox.WebhookConfig{Secret: secret}, func(ctx context.Context, tx pgx.Tx, m *inbox.Message) error {
		mu.Lock()
		keys[m.ID] = m.Topic + "/" + m.Key + "/" + m.Headers["content-type"]
		mu.Unlock()
		return relaytest.InsertEffect(ctx, tx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	wire := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		wire[r.Header.Get("Content-Type")]++
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := filepath.Join(t.TempDir(), "relay.yaml")
	yaml := fmt.Sprintf(`routes:
  - pattern: "order.*"
    to: %s/hooks
    secret: %s
    format: cloudevents-structured
    ce_source: /orders
`, srv.URL, secret)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	e := relaytest.NewEnqueuer(t, db)
	var msgs []outbox.Message
	for i := range n {
		msgs = append(msgs, outbox.Message{Topic: "order.created", Key: fmt.Sprint("order-", i%5), Payload: fmt.Appendf(nil, `{"n": %d}`, i)})
	}
	ids, err := e.Enqueue(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	relay := relaytest.StartRelay(t, db.URL, "--config", cfg, "--max-poll", "100ms")
	relaytest.WaitFor(t, 60*time.Second, "every message sent", func() bool {
		return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'") == n
	})
	relay.Stop(t)
	if got := db.Count(t, "SELECT count(DISTINCT message_id) FROM effects"); got != n {
		t.Errorf("%d distinct effects, want %d", got, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(wire) != 1 || wire["application/cloudevents+json"] < n {
		t.Errorf("requests by content type %v, want every one application/cloudevents+json", wire)
	}
	for i, id := range ids {
		if want := fmt.Sprint("order.created/order-", i%5, "/application/json"); keys[id] != want {
			t.Errorf("message %s decoded as %q, want %q", id, keys[id], want)
		}
	}
}
