package inbox_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestWebhookCrashEndToEnd: plain SQL inserts → a relay process killed
// mid-stream three times → signed webhooks → WebhookHandler with an inbox
// on the same database: every message applied exactly once.
func TestWebhookCrashEndToEnd(t *testing.T) {
	const secret = "whsec_Y3Jhc2gtZW5kLXRvLWVuZC1zZWNyZXQ="
	c := relaytest.NewCrash(t, testdb.New(t, store.Postgres), "order.created")
	h, err := inbox.WebhookHandler(c.Inbox(), &inbox.WebhookConfig{Secret: secret, Logger: relaytest.Logger()}, c.Effect)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Observe(r.Header.Get("webhook-id"))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.Run(srv.URL+"/hooks/orders", "OUTBOX_WEBHOOK_SECRET="+secret)
}
