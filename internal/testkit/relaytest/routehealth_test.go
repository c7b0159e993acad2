package relaytest_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// receiver is a webhook endpoint that answers each request with what
// answer says and keeps the time of every request and of each message's
// first acceptance, by its own clock.
type receiver struct {
	answer func(body string) (status int, header http.Header)
	hold   time.Duration // each request takes this long

	mu        sync.Mutex
	requests  []time.Time
	delivered map[string]time.Time
	inflight  int
	peak      int
}

// failing is a receiver's answer: code to a request whose body holds
// mark, 200 to the others.
func failing(mark string, code int) func(body string) (int, http.Header) {
	return func(body string) (int, http.Header) {
		if strings.Contains(body, mark) {
			return code, nil
		}
		return http.StatusOK, nil
	}
}

func newReceiver(t *testing.T, answer func(body string) (int, http.Header)) (*receiver, string) {
	r := &receiver{answer: answer, delivered: map[string]time.Time{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL + "/hooks"
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	now := time.Now()
	r.mu.Lock()
	r.requests = append(r.requests, now)
	r.inflight++
	r.peak = max(r.peak, r.inflight)
	r.mu.Unlock()
	time.Sleep(r.hold)
	status, header := r.answer(string(body))
	r.mu.Lock()
	r.inflight--
	if status/100 == 2 {
		if _, ok := r.delivered[req.Header.Get("webhook-id")]; !ok {
			r.delivered[req.Header.Get("webhook-id")] = now
		}
	}
	r.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.delivered)
}

// requestsBetween counts the requests received in [from, to).
func (r *receiver) requestsBetween(from, to time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.requests {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// span is the time from the first to the last acceptance.
func (r *receiver) span() (first, last time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, at := range r.delivered {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		last = maxTime(last, at)
	}
	return first, last
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func enqueue(t *testing.T, e *relaytest.Enqueuer, n int, msg func(i int) outbox.Message) {
	t.Helper()
	for from := 0; from < n; from += 500 {
		var msgs []outbox.Message
		for i := from; i < min(n, from+500); i++ {
			msgs = append(msgs, msg(i))
		}
		if _, err := e.Enqueue(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
}

func plain(i int) outbox.Message {
	return outbox.Message{Topic: "order.created", Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
}

func counts(t *testing.T, db *testdb.DB) (sent, dead int) {
	return relaytest.Count(t, db, store.StatusSent), relaytest.Count(t, db, store.StatusDead)
}

// TestOutageChargesNothing: a webhook answering 503 to everything for
// 20 s, then 200, with a short retry policy. The route goes down, gets
// only probes (at most 5 requests a second on average after the first
// 3 s), nothing goes dead, and the whole backlog (300 pending before, 100
// enqueued halfway) is delivered within 45 s of the recovery.
func TestOutageChargesNothing(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	var upAt time.Time
	var mu sync.Mutex
	rec, url := newReceiver(t, func(string) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		if time.Now().Before(upAt) {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	enqueue(t, e, 300, plain)
	mu.Lock()
	upAt = time.Now().Add(time.Hour)
	mu.Unlock()
	p := relaytest.StartRelay(t, db.URL, "--to", url, "--retry-base", "100ms", "--retry-cap", "1s")
	start := time.Now()
	mu.Lock()
	upAt = start.Add(20 * time.Second)
	mu.Unlock()
	time.Sleep(10 * time.Second)
	enqueue(t, e, 100, func(i int) outbox.Message { return plain(300 + i) })
	relaytest.WaitFor(t, 2*time.Minute, "400 deliveries", func() bool { return rec.count() == 400 })
	p.Stop(t)

	_, last := rec.span()
	sent, dead := counts(t, db)
	down := rec.requestsBetween(start.Add(3*time.Second), upAt)
	perSecond := float64(down) / upAt.Sub(start.Add(3*time.Second)).Seconds()
	t.Logf("requests while down after 3 s: %d (%.2f/s); all delivered %s after recovery; relay log: %d down, %d up lines",
		down, perSecond, last.Sub(upAt).Round(time.Millisecond), p.Logged("route down:"), p.Logged("route up again after"))
	switch {
	case dead != 0 || sent != 400:
		t.Fatalf("sent %d, dead %d; want 400, 0", sent, dead)
	case perSecond > 5:
		t.Fatalf("%.2f requests/s while the destination was down, want at most 5", perSecond)
	case last.Sub(upAt) > 45*time.Second:
		t.Fatalf("last delivery %s after recovery, want within 45s", last.Sub(upAt))
	case p.Logged("route down:") == 0 || p.Logged("route up again after") == 0:
		t.Fatalf("no route down/up log lines")
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE attempts > 2"); n != 0 {
		t.Fatalf("%d messages were charged more than 2 attempts for the outage", n)
	}
}

// TestFailingMessagesAreTheirs: 5 messages the webhook always answers 500,
// among 100 it accepts, with max_attempts 3: the 5 go dead with 3
// attempts each, the 100 are sent; one 400-answered message on an idle
// route goes dead at once.
func TestFailingMessagesAreTheirs(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	_, url := newReceiver(t, func(body string) (int, http.Header) {
		switch {
		case strings.Contains(body, "bad"):
			return http.StatusInternalServerError, nil
		case strings.Contains(body, "rejected"):
			return http.StatusBadRequest, nil
		}
		return http.StatusOK, nil
	})
	enqueue(t, e, 105, func(i int) outbox.Message {
		m := plain(i)
		if i%21 == 10 {
			m.Payload = fmt.Appendf(nil, `{"bad":%d}`, i)
		}
		m.MaxAttempts = 3
		return m
	})
	p := relaytest.StartRelay(t, db.URL, "--to", url, "--retry-base", "100ms", "--retry-cap", "1s")
	relaytest.WaitFor(t, 2*time.Minute, "100 sent, 5 dead", func() bool {
		sent, dead := counts(t, db)
		return sent == 100 && dead == 5
	})
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead' AND attempts = 3"); n != 5 {
		t.Fatalf("%d of the 5 dead messages have 3 attempts", n)
	}
	enqueue(t, e, 1, func(int) outbox.Message {
		return outbox.Message{Topic: "order.created", Payload: []byte(`{"rejected":true}`)}
	})
	relaytest.WaitFor(t, time.Minute, "the rejected message dead", func() bool {
		return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead' AND attempts = 1 AND last_error LIKE '%400%'") == 1
	})
	p.Stop(t)
	if p.Logged("route down:") != 0 {
		t.Fatal("the route went down")
	}
}

// TestPoisonAmongMany: one poison message among 10,000 good ones goes
// dead; the rest flow.
func TestPoisonAmongMany(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	rec, url := newReceiver(t, failing("poison", http.StatusUnprocessableEntity))
	enqueue(t, e, 10001, func(i int) outbox.Message {
		m := plain(i)
		if i == 5000 {
			m.Payload = []byte(`{"poison":true}`)
		}
		return m
	})
	p := relaytest.StartRelay(t, db.URL, "--to", url)
	relaytest.WaitFor(t, 5*time.Minute, "10,000 sent, 1 dead", func() bool {
		sent, dead := counts(t, db)
		return sent == 10000 && dead == 1
	})
	p.Stop(t)
	if rec.count() != 10000 || p.Logged("route down:") != 0 {
		t.Fatalf("%d delivered, route down %d times", rec.count(), p.Logged("route down:"))
	}
}

// TestRandomHalfNeverDown: a destination failing half the deliveries at
// random is never declared down; the messages are retried until sent.
func TestRandomHalfNeverDown(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 7))
	_, url := newReceiver(t, func(string) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(2) == 0 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	enqueue(t, e, 500, func(i int) outbox.Message {
		m := plain(i)
		m.MaxAttempts = 40 // 2^-40: none runs out by chance
		return m
	})
	p := relaytest.StartRelay(t, db.URL, "--to", url, "--retry-base", "50ms", "--retry-cap", "500ms")
	relaytest.WaitFor(t, 3*time.Minute, "500 sent", func() bool {
		sent, _ := counts(t, db)
		return sent == 500
	})
	p.Stop(t)
	retried := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent' AND attempts > 1")
	t.Logf("%d of 500 messages needed more than one attempt", retried)
	if p.Logged("route down:") != 0 || retried == 0 {
		t.Fatalf("route down %d times, %d retried; want never down, some retried", p.Logged("route down:"), retried)
	}
}

// TestRateLimit: a route with rate=100/s delivers a 2,000-message backlog
// over at least 19 s by the receiver's clock; max_in_flight bounds the
// requests the receiver sees at once.
func TestRateLimit(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	rec, url := newReceiver(t, func(string) (int, http.Header) { return http.StatusOK, nil })
	rec.hold = 5 * time.Millisecond
	enqueue(t, e, 2000, plain)
	p := relaytest.StartRelay(t, db.URL, "--to", url+"?rate=100/s&max_in_flight=4")
	relaytest.WaitFor(t, 2*time.Minute, "2,000 deliveries", func() bool { return rec.count() == 2000 })
	p.Stop(t)
	first, last := rec.span()
	rec.mu.Lock()
	peak := rec.peak
	rec.mu.Unlock()
	t.Logf("2,000 messages over %s, at most %d requests at once", last.Sub(first).Round(time.Millisecond), peak)
	if last.Sub(first) < 19*time.Second || peak > 4 {
		t.Fatalf("delivered over %s with %d at once, want at least 19s and at most 4", last.Sub(first), peak)
	}
}

// TestRetryAfterHoldsRoute: a 429 with Retry-After holds the whole route
// for that long, and the message is not charged for it.
func TestRetryAfterHoldsRoute(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	var mu sync.Mutex
	answered := 0
	rec, url := newReceiver(t, func(string) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		answered++
		if answered == 1 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"3"}}
		}
		return http.StatusOK, nil
	})
	enqueue(t, e, 1, plain)
	p := relaytest.StartRelay(t, db.URL, "--to", url, "--retry-base", "10ms", "--retry-cap", "10ms")
	relaytest.WaitFor(t, time.Minute, "the message sent", func() bool { return rec.count() == 1 })
	enqueue(t, e, 1, func(int) outbox.Message { return plain(1) })
	relaytest.WaitFor(t, time.Minute, "the second message sent", func() bool { return rec.count() == 2 })
	p.Stop(t)
	rec.mu.Lock()
	reqs := append([]time.Time(nil), rec.requests...)
	rec.mu.Unlock()
	if len(reqs) != 3 || reqs[1].Sub(reqs[0]) < 2900*time.Millisecond {
		t.Fatalf("requests at %v, want the retry 3s after the 429", reqs)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE attempts = 1 AND status = 'sent'"); n != 2 {
		t.Fatalf("%d messages sent with one attempt, want 2: the 429 is not charged", n)
	}
}
