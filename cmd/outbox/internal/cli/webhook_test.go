package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/webhooksig"
)

// TestRelayWebhook: http routes are signed with the route's own secret,
// else OUTBOX_WEBHOOK_SECRET; the message id travels as webhook-id.
func TestRelayWebhook(t *testing.T) {
	t.Parallel()
	const routeSecret, envSecret = "whsec_cm91dGUtc2VjcmV0LWtleQ==", "env-secret-key-of-the-test"
	type hit struct {
		path string
		id   string
		err  error
	}
	var mu sync.Mutex
	var hits []hit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		secret := envSecret
		if r.URL.Path == "/orders" {
			secret = routeSecret
		}
		err := webhooksig.Verify(secret, r.Header, body, time.Minute, time.Now())
		mu.Lock()
		hits = append(hits, hit{r.URL.Path, r.Header.Get("webhook-id"), err})
		mu.Unlock()
	}))
	defer srv.Close()

	db := testdb.New(t, store.SQLite)
	cfg := writeFile(t, "outbox.yaml", "routes:\n  - pattern: order.*\n    to: "+srv.URL+"/orders\n    secret: "+routeSecret+"\n")
	vars := map[string]string{"OUTBOX_DATABASE_URL": db.URL, "OUTBOX_WEBHOOK_SECRET": envSecret, "OUTBOX_CONFIG": cfg}
	order := enqueueOK(t, vars, "--topic", "order.created", "--payload", "{}")
	other := enqueueOK(t, vars, "--topic", "user.signed_up", "--payload", "{}")
	var stdout, stderr syncbuf.Buffer
	stop := startRelay(t, vars, &stdout, &stderr, "--to", srv.URL+"/other")
	waitFor(t, "both messages sent", func() bool {
		st, err := db.Store().Stats(context.Background())
		return err == nil && st.Sent == 2
	})
	if code := stop(); code != 0 {
		t.Fatalf("relay exit %d\nstderr: %s", code, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{order: "/orders", other: "/other"}
	if len(hits) != 2 {
		t.Fatalf("requests: %+v", hits)
	}
	for _, h := range hits {
		if want[h.id] != h.path || h.err != nil {
			t.Errorf("request %+v, want path %q and a valid signature", h, want[h.id])
		}
	}
	if strings.Contains(stderr.String(), envSecret) || strings.Contains(stderr.String(), routeSecret) {
		t.Errorf("logs show a secret:\n%s", stderr.String())
	}
}
