package relaytest_test

import (
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// keyed is message i of a backlog spread over keys keys, in order per key.
func keyed(keys int) func(i int) outbox.Message {
	return func(i int) outbox.Message {
		m := plain(i)
		m.Key = "k" + strconv.Itoa(i%keys)
		return m
	}
}

// blip reports whether the k-th request (from 0) of the message with body
// fails, for failPercent % of the requests at random. The draw is fixed
// per message and request, not by arrival order, so every run sees the
// same failures: at 2 %, 89 of the 4,000 messages fail once and 2 twice,
// none three times, a typical draw (1.6 messages are expected to fail
// twice; one in thirty draws has one failing three times in a row, which
// adds its 3-4 min third wait).
func blip(body string, k, failPercent int) bool {
	h := fnv.New64a()
	_, _ = io.WriteString(h, body)
	return rand.New(rand.NewPCG(1^h.Sum64(), uint64(k))).IntN(100) < failPercent
}

// blipRun delivers 20 keys × 200 messages through a relay with the
// default retry policy (no retry flags) to a webhook answering 503 to
// failPercent % of the requests at random (blip), and returns how long
// the relay took from its start to the last acceptance.
func blipRun(t *testing.T, failPercent int) time.Duration {
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	var mu sync.Mutex
	failed := 0
	requests := map[string]int{} // by message
	rec, url := newReceiver(t, func(body string) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		k := requests[body]
		requests[body]++
		if blip(body, k, failPercent) {
			failed++
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	const n = 4000
	enqueue(t, e, n, keyed(20))
	p := relaytest.StartRelay(t, db.URL, "--to", url)
	start := time.Now()
	relaytest.WaitFor(t, 3*time.Minute, "4,000 deliveries", func() bool { return rec.count() == n })
	p.Stop(t)
	_, last := rec.span()
	sent, dead := counts(t, db)
	var byAttempts []string
	for a := 2; a <= 10; a++ {
		if c := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent' AND attempts = "+strconv.Itoa(a)); c > 0 {
			byAttempts = append(byAttempts, strconv.Itoa(c)+" after "+strconv.Itoa(a-1)+" failures")
		}
	}
	mu.Lock()
	t.Logf("%d %% failing: %d requests answered 503, messages retried: %v; all %d delivered %s after the relay started",
		failPercent, failed, byAttempts, n, last.Sub(start).Round(time.Millisecond))
	mu.Unlock()
	if sent != n || dead != 0 {
		t.Fatalf("sent %d, dead %d; want %d, 0", sent, dead, n)
	}
	if p.Logged("route down:") != 0 {
		t.Fatalf("the route went down %d times", p.Logged("route down:"))
	}
	return last.Sub(start)
}

// TestDefaultRetryBlip: with the default retry policy a webhook that
// answers 503 to 2 % of the requests at random (the route stays up, so
// each failure is its message's) gets all of a 4,000-message backlog over
// 20 keys, none dead. The time is logged next to the same run without
// failures: each blip costs its key about a second, not minutes.
func TestDefaultRetryBlip(t *testing.T) {
	clean := blipRun(t, 0)
	blips := blipRun(t, 2)
	t.Logf("20 keys x 200 messages, default retry policy: %s without failures, %s with 2 %% answered 503",
		clean.Round(time.Millisecond), blips.Round(time.Millisecond))
}

// TestRetryAfterOneRequestPerHold: a webhook answering 429 with
// Retry-After: 3 to every request for 12 s, 200 messages pending over 40
// keys. After the first burst the relay sends about one request per hold
// (at most 2 requests/s on average after the first 2 s), charges nothing,
// and delivers everything within 40 s of the limit lifting. Retry-After
// as delay-seconds and as an HTTP date.
func TestRetryAfterOneRequestPerHold(t *testing.T) {
	for _, form := range []struct {
		name  string
		value func() string
	}{
		{"seconds", func() string { return "3" }},
		{"http-date", func() string { return time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) }},
	} {
		t.Run(form.name, func(t *testing.T) {
			db := testdb.New(t, store.Postgres)
			e := relaytest.NewEnqueuer(t, db)
			var mu sync.Mutex
			var liftAt time.Time
			rec, url := newReceiver(t, func(string) (int, http.Header) {
				mu.Lock()
				defer mu.Unlock()
				if liftAt.IsZero() || time.Now().Before(liftAt) {
					return http.StatusTooManyRequests, http.Header{"Retry-After": {form.value()}}
				}
				return http.StatusOK, nil
			})
			enqueue(t, e, 200, keyed(40))
			p := relaytest.StartRelay(t, db.URL, "--to", url)
			start := time.Now()
			mu.Lock()
			liftAt = start.Add(12 * time.Second)
			mu.Unlock()
			relaytest.WaitFor(t, 2*time.Minute, "200 deliveries", func() bool { return rec.count() == 200 })
			p.Stop(t)

			_, last := rec.span()
			sent, dead := counts(t, db)
			from := start.Add(2 * time.Second)
			limited := rec.requestsBetween(from, liftAt)
			perSecond := float64(limited) / liftAt.Sub(from).Seconds()
			t.Logf("Retry-After as %s: %d requests in the first 2 s, %d over the next 10 s while limited (%.2f/s); all delivered %s after the limit lifted",
				form.name, rec.requestsBetween(start.Add(-time.Minute), from), limited, perSecond, last.Sub(liftAt).Round(time.Millisecond))
			switch {
			case sent != 200 || dead != 0:
				t.Fatalf("sent %d, dead %d; want 200, 0", sent, dead)
			case perSecond > 2:
				t.Fatalf("%.2f requests/s while the destination asked every request to wait 3 s, want at most 2", perSecond)
			case last.Sub(liftAt) > 40*time.Second:
				t.Fatalf("last delivery %s after the limit lifted, want within 40s", last.Sub(liftAt))
			}
			if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE attempts > 1"); n != 0 {
				t.Fatalf("%d messages were charged for the 429s", n)
			}
		})
	}
}
