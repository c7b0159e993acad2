package outboxurl_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxstdout"
	"github.com/txoutbox/outbox/publisher/outboxurl"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
	"github.com/txoutbox/outbox/webhooksig"
)

func TestOpenStdout(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"stdout://", "STDOUT://", "stdout:///", "stdout:"} {
		var buf bytes.Buffer
		p := openAs[*outboxstdout.Publisher](t, raw, &outboxurl.Options{Stdout: &buf})
		errs := p.Publish(t.Context(), []*publisher.Envelope{{ID: "m1", Topic: "a.b", Destination: "a.b", Payload: []byte(`{}`), Attempt: 1}})
		if errs[0] != nil || !strings.Contains(buf.String(), `"message_id":"m1"`) {
			t.Errorf("Open(%q): publish = %v, output %q; want the line in Options.Stdout", raw, errs[0], buf.String())
		}
	}
	openAs[*outboxstdout.Publisher](t, "stdout://", nil)
}

func TestOpenWebhook(t *testing.T) {
	t.Parallel()
	var gotSig, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		gotPath = r.URL.RequestURI()
		if err := webhooksig.Verify("route-secret-of-the-test", r.Header, body, 0, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		gotSig = r.Header.Get("webhook-signature")
	}))
	t.Cleanup(srv.Close)
	p := openAs[*outboxwebhook.Publisher](t, srv.URL+"/hooks/orders?tenant=7", &outboxurl.Options{WebhookSecret: "route-secret-of-the-test"})
	errs := p.Publish(t.Context(), []*publisher.Envelope{{ID: "m1", Topic: "a.b", Payload: []byte(`{}`)}})
	if errs[0] != nil {
		t.Fatalf("Publish: %v", errs[0])
	}
	if gotSig == "" || gotPath != "/hooks/orders?tenant=7" {
		t.Errorf("signature %q, path %q; want a signed POST to /hooks/orders?tenant=7", gotSig, gotPath)
	}
	for _, raw := range []string{"https://hooks.example.com/x", "HTTP://example.com:8080"} {
		openAs[*outboxwebhook.Publisher](t, raw, nil)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		opts *outboxurl.Options
		want []string
	}{
		{"", nil, []string{"empty"}},
		{"example.com/hook", nil, []string{"no scheme", "stdout, http, https"}},
		{"foo://bar", nil, []string{`unknown scheme "foo"`, "stdout, http, https"}},
		{"kafka://broker:9092?bogus=1", nil, []string{"bogus"}},
		{"amqp://guest:guestpass@rabbit:5672/vhost?bogus=1", nil, []string{"bogus", "guest:xxxxx@"}},
		{"nats://n:4222?bogus=1", nil, []string{"bogus"}},
		{"redis://:redispass@r:6379/0?bogus=1", nil, []string{"bogus"}},
		{"mqtt://m:1883?bogus=1", nil, []string{"bogus"}},
		{"http:///path", nil, []string{"has no host"}},
		{"https://:443/path", nil, []string{"has no host"}},
		{"http://a b/", nil, []string{"not a valid URL"}},
		{"http://user:pa ss@host/", nil, []string{"not a valid URL", "user:xxxxx@"}},
		{"stdout://somewhere", nil, []string{"stdout takes no host"}},
		{"https://example.com", &outboxurl.Options{Timeout: -1}, []string{"timeout"}},
		{"https://example.com", &outboxurl.Options{WebhookSecret: "whsec_@@@notbase64"}, []string{"Secret"}},
	} {
		openFails(t, tc.raw, tc.opts, tc.want, "guestpass", "redispass", "pa ss", "@@@notbase64")
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://example.com/hook", "https://example.com/hook"},
		{"https://user:secret@example.com/hook", "https://user:xxxxx@example.com/hook"},
		{"amqp://guest:guest@rabbit:5672/vhost?exchange=events", "amqp://guest:xxxxx@rabbit:5672/vhost?exchange=events"},
		{"redis://:p4ss@redis:6379/0", "redis://xxxxx@redis:6379/0"},
		{"https://tokenonly@example.com/", "https://xxxxx@example.com/"},
		{"https://example.com/hook?password=pw&x=1", "https://example.com/hook?password=xxxxx&x=1"},
		{"https://example.com/hook?token=abc&secret=def&keep=me", "https://example.com/hook?token=xxxxx&secret=xxxxx&keep=me"},
		{"https://example.com/hook?api_key=k&Access_Token=t&sig=s#frag", "https://example.com/hook?api_key=xxxxx&Access_Token=xxxxx&sig=xxxxx#frag"},
		{"https://example.com/hook?pass%77ord=pw", "https://example.com/hook?pass%77ord=xxxxx"},
		{"https://example.com/hook?token", "https://example.com/hook?token"},
		{"https://u:p@example.com/a@b?email=a@b.c", "https://u:xxxxx@example.com/a@b?email=a@b.c"},
		{"http://user:pa/ss@host/x", "http://user:xxxxx@host/x"},
		{"http://user:pa?ss@host/x", "http://user:xxxxx@host/x"},
		{"//user:pw@host/x", "//user:xxxxx@host/x"},
		{"https://@host/x", "https://@host/x"},
		{"stdout://", "stdout://"},
		{"", ""},
		{"not a url at all", "not a url at all"},
	} {
		if got := outboxurl.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRedact checks that Redact never panics, is idempotent, and that no
// password or secret-looking query value of a parseable URL survives.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"https://user:secret@example.com/hook?token=abc",
		"amqp://guest:guest@rabbit:5672/vhost?exchange=events",
		"redis://:p@r:6379/0",
		"http://a@b@c/d?e=f&password=g#h",
		"kafka://h1:9092,h2:9092",
		"://@?=&#",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out := outboxurl.Redact(raw)
		if again := outboxurl.Redact(out); again != out {
			t.Fatalf("Redact not idempotent: %q -> %q -> %q", raw, out, again)
		}
		u, err := url.Parse(raw)
		if err != nil || u.User == nil {
			return
		}
		ru, err := url.Parse(out)
		if err != nil {
			return
		}
		if ru.User == nil {
			t.Fatalf("Redact(%q) = %q lost the userinfo marker", raw, out)
		}
		if pw, ok := ru.User.Password(); ok && pw != "xxxxx" {
			t.Fatalf("Redact(%q) = %q keeps password %q", raw, out, pw)
		}
		if _, ok := ru.User.Password(); !ok && u.User.String() != "" && ru.User.Username() != "xxxxx" {
			t.Fatalf("Redact(%q) = %q keeps a lone user %q", raw, out, ru.User.Username())
		}
	})
}
