package cli

import (
	"context"
	"encoding/base64"
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

// unsignedWarning is what the relay logs for a webhook route with no
// secret.
const unsignedWarning = "webhook route without a secret"

// TestWebhookShortSecretRefused: a webhook secret shorter than 16 bytes
// (after whsec_ decoding), from the route, OUTBOX_WEBHOOK_SECRET or the
// config's webhook_secret, stops the relay at start with one line naming
// the route and exit 2; the secret is never printed.
func TestWebhookShortSecretRefused(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	short := "sh0rt-s3cret" // 12 bytes
	whsecShort := "whsec_" + base64.StdEncoding.EncodeToString([]byte("fifteen-bytes!!"))
	for _, tc := range []struct {
		name   string
		vars   map[string]string
		config string
		args   []string
		want   string
		secret string
	}{
		{"OUTBOX_WEBHOOK_SECRET on --route", map[string]string{"OUTBOX_WEBHOOK_SECRET": short}, "",
			[]string{"--route", "order.*=https://example.com/hooks"}, `--route "order.*=https://example.com/hooks"`, short},
		{"a whsec_ of 15 bytes on --to", map[string]string{"OUTBOX_WEBHOOK_SECRET": whsecShort}, "",
			[]string{"--to", "http://example.com/hooks"}, "--to", whsecShort},
		{"a route's own secret", nil, "routes:\n  - pattern: order.*\n    to: https://example.com/hooks\n    secret: " + short + "\n",
			nil, "routes[0]", short},
		{"webhook_secret", nil, "webhook_secret: " + short + "\nto: https://example.com/hooks\n",
			nil, "to", short},
		{"allowed on another route only", nil, "routes:\n  - {pattern: a.*, to: https://example.com/a, secret: " + short + ", allow_short_secret: true}\n  - {pattern: b.*, to: https://example.com/b, secret: " + short + "}\n",
			nil, "routes[1]", short},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{"OUTBOX_DATABASE_URL": db.URL}
			for k, v := range tc.vars {
				vars[k] = v
			}
			if tc.config != "" {
				vars["OUTBOX_CONFIG"] = writeFile(t, "outbox.yaml", tc.config)
			}
			r := run(t, vars, append([]string{"relay"}, tc.args...)...)
			r.failed(t, ExitUsage, "shorter than 16 bytes", tc.want, "--webhook-allow-short-secret", "allow_short_secret")
			if strings.Contains(r.stderr+r.stdout, tc.secret) || strings.Contains(r.stderr, strings.TrimPrefix(tc.secret, "whsec_")) {
				t.Errorf("output shows the secret:\n%s%s", r.stdout, r.stderr)
			}
		})
	}
}

// TestWebhookShortSecretAllowed: each way of opting out (the flag, the
// config's webhook_allow_short_secret, the route's allow_short_secret)
// lets a short secret sign, and the receiver verifies it; a route with a
// secret logs no unsigned warning.
func TestWebhookShortSecretAllowed(t *testing.T) {
	t.Parallel()
	const short = "abc"
	for _, tc := range []struct {
		name   string
		config func(url string) string
		args   func(url string) []string
	}{
		{"--webhook-allow-short-secret", nil, func(url string) []string {
			return []string{"--to", url, "--webhook-allow-short-secret"}
		}},
		{"webhook_allow_short_secret", func(url string) string {
			return "webhook_allow_short_secret: true\nto: " + url + "\n"
		}, nil},
		{"allow_short_secret", func(url string) string {
			return "routes:\n  - {pattern: '*', to: '" + url + "', secret: " + short + ", allow_short_secret: true}\n"
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var verified []error
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				err := webhooksig.Verify(short, r.Header, body, time.Minute, time.Now())
				mu.Lock()
				verified = append(verified, err)
				mu.Unlock()
			}))
			defer srv.Close()
			db := testdb.New(t, store.SQLite)
			vars := map[string]string{"OUTBOX_DATABASE_URL": db.URL, "OUTBOX_WEBHOOK_SECRET": short}
			var args []string
			if tc.config != nil {
				vars["OUTBOX_CONFIG"] = writeFile(t, "outbox.yaml", tc.config(srv.URL+"/hooks"))
			}
			if tc.args != nil {
				args = tc.args(srv.URL + "/hooks")
			}
			enqueueOK(t, vars, "--topic", "order.created", "--payload", "{}")
			var stdout, stderr syncbuf.Buffer
			stop := startRelay(t, vars, &stdout, &stderr, args...)
			waitFor(t, "the message sent", func() bool {
				st, err := db.Store().Stats(context.Background())
				return err == nil && st.Sent == 1
			})
			if code := stop(); code != 0 {
				t.Fatalf("relay exit %d\nstderr: %s", code, stderr.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(verified) != 1 || verified[0] != nil {
				t.Errorf("receiver's verification: %v", verified)
			}
			if strings.Contains(stderr.String(), unsignedWarning) {
				t.Errorf("a signed route logged the unsigned warning:\n%s", stderr.String())
			}
		})
	}
}

// TestWebhookUnsignedWarning: a webhook route with no secret logs one
// warning at start naming the route; other routes log none.
func TestWebhookUnsignedWarning(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var signatures []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		signatures = append(signatures, r.Header.Get("webhook-signature"))
		mu.Unlock()
	}))
	defer srv.Close()
	db := testdb.New(t, store.SQLite)
	vars := map[string]string{"OUTBOX_DATABASE_URL": db.URL}
	enqueueOK(t, vars, "--topic", "order.created", "--payload", "{}")
	enqueueOK(t, vars, "--topic", "order.paid", "--payload", "{}")
	var stdout, stderr syncbuf.Buffer
	stop := startRelay(t, vars, &stdout, &stderr, "--route", "order.*="+srv.URL+"/orders", "--to", "stdout://")
	waitFor(t, "both messages sent", func() bool {
		st, err := db.Store().Stats(context.Background())
		return err == nil && st.Sent == 2
	})
	if code := stop(); code != 0 {
		t.Fatalf("relay exit %d\nstderr: %s", code, stderr.String())
	}
	log := stderr.String()
	if n := strings.Count(log, unsignedWarning); n != 1 {
		t.Fatalf("the unsigned warning was logged %d times, want once:\n%s", n, log)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, unsignedWarning) && (!strings.Contains(line, "order.*") || !strings.Contains(line, "level=WARN")) {
			t.Errorf("the warning should be a WARN naming route order.*: %s", line)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(signatures) != 2 || signatures[0] != "" || signatures[1] != "" {
		t.Errorf("webhook-signature headers %q, want two requests without one", signatures)
	}
}
