package outboxwebhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// received is one request as the test server saw it.
type received struct {
	header http.Header
	body   []byte
}

// recorder is an httptest server that answers with status and records
// every request.
type recorder struct {
	mu   sync.Mutex
	reqs []received
	srv  *httptest.Server
}

func newRecorder(t *testing.T, status int) *recorder {
	t.Helper()
	r := &recorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, received{header: req.Header.Clone(), body: body})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs...)
}

func newPublisher(t *testing.T, endpoint string, cfg *outboxwebhook.Config) *outboxwebhook.Publisher {
	t.Helper()
	p, err := outboxwebhook.New(endpoint, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func envelope(id string, payload string) *publisher.Envelope {
	return &publisher.Envelope{
		ID:          id,
		Topic:       "order.created",
		Key:         "order-42",
		Destination: "order.created",
		Payload:     []byte(payload),
		Headers: map[string]string{
			publisher.HeaderTopic:       "order.created",
			publisher.HeaderBusinessKey: "order-42",
			publisher.HeaderContentType: "application/json",
		},
		Attempt: 1,
	}
}

func publishOne(t *testing.T, p publisher.Publisher, env *publisher.Envelope) error {
	t.Helper()
	errs := p.Publish(t.Context(), []*publisher.Envelope{env})
	if len(errs) != 1 {
		t.Fatalf("Publish returned %d results for 1 envelope", len(errs))
	}
	return errs[0]
}

// hmacSign is the Standard Webhooks signature, computed independently of
// the package.
func hmacSign(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestSignature(t *testing.T) {
	t.Parallel()
	rawKey := []byte{0x00, 0xff, 0x10, 'k', 'e', 'y', 0x80, 0x7f, 0x01, 0xfe, 0x20, 's', 'i', 'g', 0x90, 0x6f}
	for _, tc := range []struct {
		name   string
		secret string
		key    []byte
		short  bool // AllowShortSecret
	}{
		{"raw secret", "my-plain-secret-key", []byte("my-plain-secret-key"), false},
		{"whsec secret", "whsec_" + base64.StdEncoding.EncodeToString(rawKey), rawKey, false},
		{"short secret allowed", "abc", []byte("abc"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, http.StatusOK)
			p := newPublisher(t, rec.srv.URL, &outboxwebhook.Config{Secret: tc.secret, AllowShortSecret: tc.short})
			before := time.Now().Unix()
			env := envelope("0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e", `{"order_id":42}`)
			if err := publishOne(t, p, env); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			after := time.Now().Unix()
			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("server got %d requests, want 1", len(reqs))
			}
			h := reqs[0].header
			if got := h.Get("webhook-id"); got != env.ID {
				t.Errorf("webhook-id = %q, want %q", got, env.ID)
			}
			ts := h.Get("webhook-timestamp")
			sec, err := strconv.ParseInt(ts, 10, 64)
			if err != nil || sec < before || sec > after {
				t.Errorf("webhook-timestamp = %q, want unix seconds in [%d, %d]", ts, before, after)
			}
			if got, want := h.Get("webhook-signature"), hmacSign(tc.key, env.ID, ts, env.Payload); got != want {
				t.Errorf("webhook-signature = %q, want %q", got, want)
			}
			if err := outboxwebhook.Verify(tc.secret, h, reqs[0].body, 0, time.Now()); err != nil {
				t.Errorf("Verify of a delivered request: %v", err)
			}
		})
	}
}

func TestNoSecretNoSignature(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK)
	p := newPublisher(t, rec.srv.URL, nil)
	env := envelope("id-1", `{}`)
	env.Headers["webhook-signature"] = "v1,forged" // a producer's header must not pass as ours
	if err := publishOne(t, p, env); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	h := rec.requests()[0].header
	if got := h.Values("webhook-signature"); len(got) != 0 {
		t.Errorf("webhook-signature = %q without a secret, want none", got)
	}
	if h.Get("webhook-id") != "id-1" || h.Get("webhook-timestamp") == "" {
		t.Errorf("webhook-id/timestamp missing: %v", h)
	}
}

func TestIDStableTimestampFresh(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK)
	p := newPublisher(t, rec.srv.URL, &outboxwebhook.Config{Secret: "s3cret-s3cret-s3cret"})
	var clock atomic.Int64
	clock.Store(1_700_000_000)
	outboxwebhook.SetClock(p, func() time.Time { return time.Unix(clock.Load(), 0) })

	env := envelope("0190d2c4-0000-7000-8000-000000000001", `{"n":1}`)
	if err := publishOne(t, p, env); err != nil {
		t.Fatal(err)
	}
	clock.Add(37)
	env.Attempt = 2
	if err := publishOne(t, p, env); err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want 2", len(reqs))
	}
	a, b := reqs[0].header, reqs[1].header
	if a.Get("webhook-id") != env.ID || b.Get("webhook-id") != env.ID {
		t.Errorf("webhook-id = %q then %q, want %q both times", a.Get("webhook-id"), b.Get("webhook-id"), env.ID)
	}
	if a.Get("webhook-timestamp") != "1700000000" || b.Get("webhook-timestamp") != "1700000037" {
		t.Errorf("webhook-timestamp = %q then %q, want 1700000000 then 1700000037", a.Get("webhook-timestamp"), b.Get("webhook-timestamp"))
	}
	if a.Get("webhook-signature") == b.Get("webhook-signature") {
		t.Error("signature did not change with the timestamp")
	}
	for i, r := range reqs {
		ts, _ := strconv.ParseInt(r.header.Get("webhook-timestamp"), 10, 64)
		if err := outboxwebhook.Verify("s3cret-s3cret-s3cret", r.header, r.body, time.Minute, time.Unix(ts, 0)); err != nil {
			t.Errorf("request %d: Verify: %v", i, err)
		}
	}
}

func TestSuccessStatuses(t *testing.T) {
	t.Parallel()
	for _, status := range []int{200, 201, 202, 204, 299} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, status)
			p := newPublisher(t, rec.srv.URL, nil)
			if err := publishOne(t, p, envelope("id", `{}`)); err != nil {
				t.Errorf("status %d: Publish = %v, want nil", status, err)
			}
		})
	}
}

// respond serves every request with status, headers and body.
func respond(t *testing.T, status int, header map[string]string, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestMaxRetryAfter: Config.MaxRetryAfter caps a Retry-After, in seconds
// or as an HTTP date, below or above the default hour.
func TestMaxRetryAfter(t *testing.T) {
	t.Parallel()
	inADay := time.Now().Add(24 * time.Hour).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name, header string
		limit, want  time.Duration
	}{
		{"seconds below the default", "7200", 0, time.Hour},
		{"seconds, limit lowered", "7200", 10 * time.Second, 10 * time.Second},
		{"seconds, limit raised", "7200", 3 * time.Hour, 2 * time.Hour},
		{"date, limit lowered", inADay, time.Minute, time.Minute},
		{"date, limit raised", inADay, 48 * time.Hour, 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := respond(t, 429, map[string]string{"Retry-After": tc.header}, "")
			p := newPublisher(t, srv.URL, &outboxwebhook.Config{MaxRetryAfter: tc.limit})
			got := publisher.RetryAfterOf(publishOne(t, p, envelope("id", `{}`)))
			if got > tc.want || got < tc.want-2*time.Second {
				t.Errorf("Retry-After %s with MaxRetryAfter %v: wait %v, want %v", tc.header, tc.limit, got, tc.want)
			}
		})
	}
	if _, err := outboxwebhook.New("https://h", &outboxwebhook.Config{MaxRetryAfter: -time.Second}); err == nil || !strings.Contains(err.Error(), "MaxRetryAfter") {
		t.Errorf("a negative MaxRetryAfter: %v, want an error naming it", err)
	}
}

func TestStatusClasses(t *testing.T) {
	t.Parallel()
	httpDate := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		class     publisher.ErrorClass
		after     time.Duration // exact wait; -1: between 60 s and 90 s (an HTTP date)
		inMessage string
	}{
		{"500", 500, nil, "boom", publisher.ClassTransient, 0, "HTTP 500 Internal Server Error from "},
		{"502", 502, nil, "", publisher.ClassTransient, 0, "HTTP 502 Bad Gateway"},
		{"503 retry-after seconds", 503, map[string]string{"Retry-After": "120"}, "", publisher.ClassTransient, 2 * time.Minute, "HTTP 503 Service Unavailable"},
		{"503 retry-after date", 503, map[string]string{"Retry-After": httpDate}, "", publisher.ClassTransient, -1, "HTTP 503"},
		{"429 retry-after", 429, map[string]string{"Retry-After": "7"}, "slow down", publisher.ClassTransient, 7 * time.Second, "HTTP 429 Too Many Requests"},
		{"429 retry-after capped", 429, map[string]string{"Retry-After": "999999999"}, "", publisher.ClassTransient, time.Hour, "HTTP 429"},
		{"429 retry-after garbage", 429, map[string]string{"Retry-After": "soon"}, "", publisher.ClassTransient, 0, "HTTP 429"},
		{"408", 408, nil, "", publisher.ClassTransient, 0, "HTTP 408 Request Timeout"},
		{"400", 400, nil, `{"error":"bad order"}`, publisher.ClassPermanent, 0, `HTTP 400 Bad Request from `},
		{"401", 401, nil, "", publisher.ClassPermanent, 0, "HTTP 401 Unauthorized"},
		{"404", 404, nil, "no such hook", publisher.ClassPermanent, 0, "HTTP 404 Not Found from "},
		{"410", 410, nil, "", publisher.ClassPermanent, 0, "HTTP 410 Gone"},
		{"422", 422, nil, "", publisher.ClassPermanent, 0, "HTTP 422"},
		{"304", 304, nil, "", publisher.ClassPermanent, 0, "HTTP 304 Not Modified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := respond(t, tc.status, tc.header, tc.body)
			p := newPublisher(t, srv.URL+"/hook", nil)
			err := publishOne(t, p, envelope("id", `{}`))
			if err == nil {
				t.Fatalf("status %d: Publish = nil, want an error", tc.status)
			}
			if got := publisher.Classify(err); got != tc.class {
				t.Errorf("Classify = %v, want %v (err: %v)", got, tc.class, err)
			}
			got := publisher.RetryAfterOf(err)
			switch {
			case tc.after == -1:
				if got < 60*time.Second || got > 90*time.Second {
					t.Errorf("RetryAfterOf = %v, want 60s..90s", got)
				}
			case got != tc.after:
				t.Errorf("RetryAfterOf = %v, want %v", got, tc.after)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.inMessage) || !strings.Contains(msg, srv.URL+"/hook") {
				t.Errorf("error %q does not contain %q and the URL", msg, tc.inMessage)
			}
			if tc.body != "" && !strings.Contains(msg, tc.body) {
				t.Errorf("error %q does not quote the body %q", msg, tc.body)
			}
			var herr *outboxwebhook.HTTPError
			if !errors.As(err, &herr) || herr.StatusCode != tc.status {
				t.Errorf("errors.As(*HTTPError) = %v, %+v; want status %d", errors.As(err, &herr), herr, tc.status)
			}
		})
	}
}

func TestErrorBodyIsOneShortLine(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("line one\nline\ttwo\r\n", 100) + "é"
	srv := respond(t, 400, nil, body)
	p := newPublisher(t, srv.URL, nil)
	err := publishOne(t, p, envelope("id", `{}`))
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\n\t") {
		t.Errorf("error is not one line: %q", msg)
	}
	if len(msg) > 400 {
		t.Errorf("error is %d bytes, want the body cut near 200: %q", len(msg), msg)
	}
	if !strings.Contains(msg, "line one line two") {
		t.Errorf("error %q lost the body's start", msg)
	}
}

func TestRedirectsArePermanentAndNotFollowed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 307, 308} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			var targetHits atomic.Int32
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				targetHits.Add(1)
			}))
			t.Cleanup(target.Close)
			srv := respond(t, status, map[string]string{"Location": target.URL + "/elsewhere"}, "")
			p := newPublisher(t, srv.URL, nil)
			err := publishOne(t, p, envelope("id", `{}`))
			if c := publisher.Classify(err); err == nil || c != publisher.ClassPermanent {
				t.Fatalf("Publish = %v (class %v), want a permanent error", err, c)
			}
			if !strings.Contains(err.Error(), "HTTP "+strconv.Itoa(status)) || !strings.Contains(err.Error(), target.URL+"/elsewhere not followed") {
				t.Errorf("error %q does not name the status and the target", err)
			}
			if n := targetHits.Load(); n != 0 {
				t.Errorf("redirect target was hit %d times, want 0", n)
			}
		})
	}
}

func TestRedirectNotFollowedWithCallersClient(t *testing.T) {
	t.Parallel()
	var targetHits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { targetHits.Add(1) }))
	t.Cleanup(target.Close)
	srv := respond(t, 302, map[string]string{"Location": target.URL}, "")
	client := &http.Client{} // follows redirects by default
	p := newPublisher(t, srv.URL, &outboxwebhook.Config{Client: client})
	if err := publishOne(t, p, envelope("id", `{}`)); publisher.Classify(err) != publisher.ClassPermanent {
		t.Errorf("Publish = %v, want permanent", err)
	}
	if targetHits.Load() != 0 {
		t.Error("redirect was followed")
	}
	if client.CheckRedirect != nil {
		t.Error("the caller's client was modified")
	}
	client.CloseIdleConnections()
}

// closedPort returns the address of a loopback port nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestConnectionRefusedIsUnavailable(t *testing.T) {
	t.Parallel()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("do-not-print-me-ever"))
	endpoint := "http://alice:hunter2hunter2@" + closedPort(t) + "/hook?token=tok3n-value&x=1"
	p := newPublisher(t, endpoint, &outboxwebhook.Config{Secret: secret})
	err := publishOne(t, p, envelope("id", `{}`))
	if c := publisher.Classify(err); err == nil || c != publisher.ClassUnavailable {
		t.Fatalf("Publish = %v (class %v), want unavailable", err, c)
	}
	msg := err.Error()
	for _, secretPart := range []string{"hunter2hunter2", "tok3n-value", secret, "do-not-print-me-ever"} {
		if strings.Contains(msg, secretPart) {
			t.Errorf("error %q leaks %q", msg, secretPart)
		}
	}
	if !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "token=xxxxx") {
		t.Errorf("error %q should say connection refused and show the redacted URL", msg)
	}
}

func TestNoSuchHostIsUnavailable(t *testing.T) {
	t.Parallel()
	p := newPublisher(t, "http://no-such-host.invalid/hook", &outboxwebhook.Config{Timeout: 5 * time.Second})
	err := publishOne(t, p, envelope("id", `{}`))
	if c := publisher.Classify(err); err == nil || c != publisher.ClassUnavailable {
		t.Fatalf("Publish = %v (class %v), want unavailable", err, c)
	}
}

func TestTimeoutAfterSendIsUnknown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Add(1)
		select { // hang until the client gives up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	p := newPublisher(t, srv.URL, &outboxwebhook.Config{Timeout: 200 * time.Millisecond})
	err := publishOne(t, p, envelope("id", `{}`))
	if c := publisher.Classify(err); err == nil || c != publisher.ClassUnknown {
		t.Fatalf("Publish = %v (class %v), want unknown", err, c)
	}
	if got.Load() != 1 {
		t.Errorf("server saw %d requests, want 1", got.Load())
	}
	if !strings.Contains(err.Error(), "no response within 200ms") {
		t.Errorf("error %q should say it timed out", err)
	}
}

func TestParentDeadlineAfterSendIsUnknown(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	p := newPublisher(t, srv.URL, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	errs := p.Publish(ctx, []*publisher.Envelope{envelope("id", `{}`)})
	if c := publisher.Classify(errs[0]); errs[0] == nil || c != publisher.ClassUnknown {
		t.Fatalf("Publish = %v (class %v), want unknown: the request had gone out", errs[0], c)
	}
}

func TestConnectionResetMidRequestIsUnknown(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST instead of FIN
		}
		_ = conn.Close()
	}))
	t.Cleanup(srv.Close)
	p := newPublisher(t, srv.URL, nil)
	err := publishOne(t, p, envelope("id", `{}`))
	if c := publisher.Classify(err); err == nil || c != publisher.ClassUnknown {
		t.Fatalf("Publish = %v (class %v), want unknown", err, c)
	}
}

func TestBatchConcurrentInOrder(t *testing.T) {
	t.Parallel()
	const n, limit = 200, 8
	var inflight, peak atomic.Int32
	full := make(chan struct{})
	var fullOnce sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cur := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		if cur == limit {
			fullOnce.Do(func() { close(full) })
		}
		select { // the first requests wait until the limit is reached
		case <-full:
		case <-r.Context().Done():
			return
		}
		i, _ := strconv.Atoi(string(body))
		if i%3 == 0 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "rejected %d", i)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	p := newPublisher(t, srv.URL, &outboxwebhook.Config{MaxConcurrency: limit})
	batch := make([]*publisher.Envelope, n)
	for i := range batch {
		batch[i] = envelope("id-"+strconv.Itoa(i), strconv.Itoa(i))
	}
	errs := p.Publish(t.Context(), batch)
	if len(errs) != n {
		t.Fatalf("got %d results, want %d", len(errs), n)
	}
	for i, err := range errs {
		if i%3 == 0 {
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rejected %d", i)) {
				t.Errorf("result %d = %v, want the rejection of message %d", i, err, i)
			}
		} else if err != nil {
			t.Errorf("result %d = %v, want nil", i, err)
		}
	}
	if got := peak.Load(); got != limit {
		t.Errorf("peak concurrency = %d, want %d", got, limit)
	}
}

func TestPayloadByteIdentical(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK)
	p := newPublisher(t, rec.srv.URL, nil)
	binary := make([]byte, 256*4)
	for i := range binary {
		binary[i] = byte(i)
	}
	payloads := [][]byte{
		binary,
		[]byte(`{"b": "white  space kept", "n": 1.50}` + "\n"),
		{},
	}
	for i, pl := range payloads {
		env := envelope("id-"+strconv.Itoa(i), "")
		env.Payload = pl
		env.Headers[publisher.HeaderContentType] = "application/octet-stream"
		if err := publishOne(t, p, env); err != nil {
			t.Fatalf("payload %d: %v", i, err)
		}
	}
	reqs := rec.requests()
	for i, pl := range payloads {
		if !bytes.Equal(reqs[i].body, pl) {
			t.Errorf("payload %d arrived as %q, want %q", i, reqs[i].body, pl)
		}
	}
}

func TestHeadersDelivered(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK)
	p := newPublisher(t, rec.srv.URL, &outboxwebhook.Config{Headers: map[string]string{
		"Authorization": "Bearer static-token",
		"x-tenant":      "config-wins",
	}})
	env := envelope("0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e", `{"a":1}`)
	env.Headers[publisher.HeaderTraceParent] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	env.Headers["x-user-header"] = "hello world"
	env.Headers["x-tenant"] = "from-producer"
	env.Headers["webhook-id"] = "spoofed"
	if err := publishOne(t, p, env); err != nil {
		t.Fatal(err)
	}
	h := rec.requests()[0].header
	for name, want := range map[string]string{
		"outbox-topic":        "order.created",
		"outbox-business-key": "order-42",
		"content-type":        "application/json",
		"traceparent":         env.Headers[publisher.HeaderTraceParent],
		"x-user-header":       "hello world",
		"x-tenant":            "config-wins",
		"authorization":       "Bearer static-token",
		"webhook-id":          env.ID,
		"user-agent":          outboxwebhook.UserAgent,
	} {
		if got := h.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("header %s = %q, want [%q]", name, got, want)
		}
	}
}

// TestCredentialAndHopByHopHeadersNotFromMessage: message headers never
// set credentials, hop-by-hop or proxy headers on the request; the URL's
// basic authentication stays, and the rest of the message goes through.
func TestCredentialAndHopByHopHeadersNotFromMessage(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK)
	u, _ := url.Parse(rec.srv.URL)
	u.User = url.UserPassword("route-user", "route-pass")
	p := newPublisher(t, u.String(), nil)
	env := envelope("0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4f", `{"a":1}`)
	for _, name := range []string{"Authorization", "proxy-authorization", "Cookie", "Set-Cookie", "Connection",
		"Keep-Alive", "TE", "Trailer", "Upgrade", "Host", "X-Forwarded-For", "x-forwarded-host", "Forwarded", "Via", "X-Real-IP", "Expect"} {
		env.Headers[name] = "spoofed-" + strings.ToLower(name)
	}
	env.Headers["x-user-header"] = "kept"
	if err := publishOne(t, p, env); err != nil {
		t.Fatal(err)
	}
	req := rec.requests()[0]
	for name, vals := range req.header {
		for _, v := range vals {
			if strings.Contains(v, "spoofed") {
				t.Errorf("header %s: %q came from the message", name, v)
			}
		}
	}
	if got := req.header.Get("X-User-Header"); got != "kept" {
		t.Errorf("x-user-header = %q, want kept", got)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("route-user:route-pass"))
	if got := req.header.Get("Authorization"); got != want {
		t.Errorf("Authorization = %q, want the URL's basic authentication", got)
	}
}

// TestFromMessage: the header names a message may set on a request.
func TestFromMessage(t *testing.T) {
	for name, want := range map[string]bool{"authorization": false, "X-FORWARDED-PROTO": false, "cookie": false, "x-user-header": true, "traceparent": true} {
		if got := outboxwebhook.FromMessage(name); got != want {
			t.Errorf("FromMessage(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestInvalidHeaderIsPermanent(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK)
	p := newPublisher(t, rec.srv.URL, nil)
	env := envelope("id", `{}`)
	env.Headers["x-bad"] = "line\r\nInjected: yes"
	err := publishOne(t, p, env)
	if c := publisher.Classify(err); err == nil || c != publisher.ClassPermanent {
		t.Fatalf("Publish = %v (class %v), want permanent", err, c)
	}
	if len(rec.requests()) != 0 {
		t.Error("a request with a broken header was sent")
	}
}

func TestCanceledContextSendsNothing(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK)
	p := newPublisher(t, rec.srv.URL, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	errs := p.Publish(ctx, []*publisher.Envelope{envelope("a", `{}`), envelope("b", `{}`)})
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("result %d = %v, want context.Canceled", i, err)
		}
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("server got %d requests, want 0", n)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK)
	p := newPublisher(t, rec.srv.URL, nil)
	if err := publishOne(t, p, envelope("a", `{}`)); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := publishOne(t, p, envelope("b", `{}`)); err == nil {
		t.Error("Publish after Close = nil, want an error")
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		endpoint string
		cfg      *outboxwebhook.Config
		want     string
	}{
		{"no scheme", "example.com/hook", nil, "scheme must be http or https"},
		{"ftp", "ftp://example.com/hook", nil, "scheme must be http or https"},
		{"no host", "http:///hook", nil, "has no host"},
		{"not a URL", "http://bad host/", nil, "is not a URL"},
		{"negative timeout", "http://example.com", &outboxwebhook.Config{Timeout: -1}, "Timeout"},
		{"negative concurrency", "http://example.com", &outboxwebhook.Config{MaxConcurrency: -1}, "MaxConcurrency"},
		{"bad whsec", "http://example.com", &outboxwebhook.Config{Secret: "whsec_not*base64!"}, "Secret"},
		{"empty whsec", "http://example.com", &outboxwebhook.Config{Secret: "whsec_"}, "Secret"},
		{"short secret", "http://example.com", &outboxwebhook.Config{Secret: "topsecretpw"}, "shorter than 16 bytes"},
		{"short whsec", "http://example.com", &outboxwebhook.Config{Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("topsecretpw-15b"))}, "shorter than 16 bytes"},
		{"bad header", "http://example.com", &outboxwebhook.Config{Headers: map[string]string{"x-a": "b\nc"}}, "Headers"},
		{"password in URL", "http://u:topsecretpw@bad host/", nil, "u:xxxxx@"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := outboxwebhook.New(tc.endpoint, tc.cfg)
			if err == nil {
				_ = p.Close()
				t.Fatalf("New(%q) = nil error, want one containing %q", tc.endpoint, tc.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
			if strings.Contains(msg, "topsecretpw") || strings.Contains(msg, "not*base64") || strings.Contains(msg, "dG9wc2VjcmV0") {
				t.Errorf("error %q leaks a secret", msg)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]bool{200: false, 301: false, 400: false, 404: false, 408: true, 409: false, 429: true, 500: true, 503: true, 599: true} {
		if got := outboxwebhook.Retryable(status); got != want {
			t.Errorf("Retryable(%d) = %v, want %v", status, got, want)
		}
	}
}

// TestShortSecret: a key shorter than MinSecretBytes, counted after the
// whsec_ decoding, is refused with ErrShortSecret unless AllowShortSecret
// is set; 16 bytes are enough.
func TestShortSecret(t *testing.T) {
	t.Parallel()
	whsec := func(key string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key)) }
	for _, tc := range []struct {
		secret string
		allow  bool
		ok     bool
	}{
		{"abc", false, false},
		{"fifteen-bytes!!", false, false},
		{"sixteen-bytes!!!", false, true},
		{whsec("fifteen-bytes!!"), false, false}, // 26 characters, a 15-byte key
		{whsec("sixteen-bytes!!!"), false, true},
		{"abc", true, true},
		{whsec("x"), true, true},
	} {
		p, err := outboxwebhook.New("http://example.com/hook", &outboxwebhook.Config{Secret: tc.secret, AllowShortSecret: tc.allow})
		if tc.ok {
			if err != nil {
				t.Errorf("New with a %d-character secret (allow %v): %v", len(tc.secret), tc.allow, err)
				continue
			}
			_ = p.Close()
			continue
		}
		if !errors.Is(err, outboxwebhook.ErrShortSecret) {
			t.Errorf("New with a %d-character secret: %v, want ErrShortSecret", len(tc.secret), err)
		} else if strings.Contains(err.Error(), tc.secret) {
			t.Errorf("error %q contains the secret", err)
		}
	}
}
