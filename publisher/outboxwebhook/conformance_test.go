package outboxwebhook_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestConformance runs the publisher suite against a test server that
// records every request; the publisher reaches it through a fault proxy so
// that its connections can be cut.
func TestConformance(t *testing.T) {
	publishertest.Run(t, func(t *testing.T) *publishertest.Target {
		var mu sync.Mutex
		var got []publishertest.Received
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			h := map[string]string{}
			for k := range r.Header {
				h[strings.ToLower(k)] = r.Header.Get(k)
			}
			mu.Lock()
			got = append(got, publishertest.Received{ID: h["webhook-id"], Key: h["outbox-business-key"], Topic: h["outbox-topic"], Payload: body, Headers: h})
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		proxy, err := faultproxy.New(srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		p, err := outboxwebhook.New("http://"+proxy.Addr(), &outboxwebhook.Config{Secret: "conformance-secret"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return &publishertest.Target{
			Publisher:      p,
			NewDestination: func(*testing.T) string { return "orders" },
			Receive: func(t *testing.T, _ string, n int) []publishertest.Received {
				deadline := time.Now().Add(10 * time.Second)
				for {
					mu.Lock()
					out := append([]publishertest.Received(nil), got...)
					mu.Unlock()
					if len(out) >= n {
						return out
					}
					if time.Now().After(deadline) {
						t.Fatalf("received %d of %d", len(out), n)
					}
					time.Sleep(5 * time.Millisecond)
				}
			},
			Disconnect: func(*testing.T) func() {
				proxy.SetMode(faultproxy.Refuse)
				return func() { proxy.SetMode(faultproxy.Pass) }
			},
			Features: publishertest.Features{Keys: true, ArbitraryHeaders: true},
		}
	})
}
