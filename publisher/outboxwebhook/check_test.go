package outboxwebhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
	"github.com/txoutbox/outbox/webhooksig"
)

const checkSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestCheckerAnswers: 2xx is processed, 404 and 410 are not, anything else
// is an error (ask again later); the request is a signed GET of the check
// URL with the message id in place of {id}, escaped.
func TestCheckerAnswers(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		if r.Method != http.MethodGet || r.Header.Get("X-Tenant") != "acme" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if err := webhooksig.Verify(checkSecret, r.Header, nil, time.Minute, time.Now()); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch id := r.Header.Get(outboxwebhook.HeaderID); {
		case strings.HasPrefix(id, "done"):
			w.WriteHeader(http.StatusOK)
		case strings.HasPrefix(id, "gone"):
			w.WriteHeader(http.StatusGone)
		case strings.HasPrefix(id, "new"):
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p, err := outboxwebhook.New(srv.URL+"/hooks", &outboxwebhook.Config{Secret: checkSecret, Headers: map[string]string{"X-Tenant": "acme"},
		CheckURL: srv.URL + "/processed/{id}"})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Checker()
	if c == nil {
		t.Fatal("Checker() is nil with a CheckURL")
	}
	for _, tc := range []struct {
		id      string
		want    bool
		wantErr string
	}{
		{"done-1", true, ""},
		{"new-1", false, ""},
		{"gone-1", false, ""},
		{"busy-1", false, "503"},
		{"done/2 x", true, ""},
	} {
		got, err := c.Delivered(context.Background(), &publisher.Envelope{ID: tc.id})
		if got != tc.want || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Delivered(%q) = %v, %v; want %v and an error containing %q", tc.id, got, err, tc.want, tc.wantErr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if last := paths[len(paths)-1]; last != "/processed/done%2F2%20x" {
		t.Errorf("the id went into the path as %q, want it escaped", last)
	}
	if q, err := outboxwebhook.New(srv.URL, nil); err != nil || q.Checker() != nil {
		t.Errorf("a publisher without CheckURL has a Checker (%v)", err)
	}
	for _, bad := range []string{"https://h/processed", "ftp://h/{id}", "/processed/{id}"} {
		if _, err := outboxwebhook.New(srv.URL, &outboxwebhook.Config{CheckURL: bad}); err == nil {
			t.Errorf("CheckURL %q accepted", bad)
		}
	}
}

// TestCheckerUnreachable: a check URL that cannot be reached is an
// error, never a "not processed" that would send the message again.
func TestCheckerUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	p, err := outboxwebhook.New(addr+"/hooks", &outboxwebhook.Config{CheckURL: addr + "/processed/{id}", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Checker().Delivered(context.Background(), &publisher.Envelope{ID: "m1"}); got || err == nil {
		t.Fatalf("Delivered with the receiver gone = %v, %v; want an error", got, err)
	}
}
