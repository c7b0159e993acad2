package relay

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/redact"
)

// step is one moment of a scripted alert sequence: events reported, then
// the alerts due at that moment.
type step struct {
	at    time.Duration // since the start
	dead  int           // dead letters reported
	age   time.Duration // a sample of the oldest pending age (-1: none)
	kinds []string      // alerts due, by kind
	count []int64       // and their counts
}

func TestAlertRateLimitAggregates(t *testing.T) {
	a := newAlerter(AlertConfig{MinInterval: time.Minute, OldestPendingAge: 10 * time.Second}, "r1", slog.New(slog.DiscardHandler))
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []step{
		{at: 0, dead: 1, age: -1, kinds: []string{AlertDeadLetters}, count: []int64{1}},
		// Suppressed: within a minute of the last dead-letter alert.
		{at: 10 * time.Second, dead: 2, age: -1},
		{at: 20 * time.Second, dead: 4, age: -1},
		// The first sample over the threshold goes out at once; the dead
		// letters still wait.
		{at: 30 * time.Second, age: 11 * time.Second, kinds: []string{AlertOldestPending}, count: []int64{7}},
		// A minute after the first: the six held back, in one alert.
		{at: 60 * time.Second, age: 12 * time.Second, kinds: []string{AlertDeadLetters}, count: []int64{6}},
		// Still over the threshold, but within a minute of the last one.
		{at: 70 * time.Second, age: 13 * time.Second},
		{at: 90 * time.Second, age: 14 * time.Second, kinds: []string{AlertOldestPending}, count: []int64{7}},
		// Back under: recovered, once.
		{at: 100 * time.Second, age: time.Second, kinds: []string{AlertOldestPendingRecovered}, count: []int64{7}},
		{at: 110 * time.Second, age: time.Second},
		// Over again, a minute after the last alert of the kind:
		{at: 150 * time.Second, age: 20 * time.Second, kinds: []string{AlertOldestPending}, count: []int64{7}},
		// Nothing goes out later without new events.
		{at: time.Hour, age: -1},
	}
	for i, s := range steps {
		if s.dead > 0 {
			ex := make([]AlertExample, s.dead)
			for j := range ex {
				ex[j] = AlertExample{MessageID: "m" + string(rune('a'+i)) + string(rune('0'+j)), Topic: "t", Error: "boom"}
			}
			a.deadLetters(s.dead, ex)
		}
		if s.age >= 0 {
			// The created-at age plays no part: a requeued old message is
			// not a backlog.
			a.pendingAge(s.age, 48*time.Hour, 7)
		}
		got, _ := a.due(t0.Add(s.at))
		var kinds []string
		var counts []int64
		for _, al := range got {
			kinds, counts = append(kinds, al.Kind), append(counts, al.Count)
			if al.Relay != "r1" || !strings.HasPrefix(al.Text, "outbox: ") {
				t.Errorf("step %d: alert %+v", i, al)
			}
		}
		if !reflect.DeepEqual(kinds, s.kinds) || !reflect.DeepEqual(counts, s.count) {
			t.Fatalf("step %d (at %v): alerts %v %v, want %v %v", i, s.at, kinds, counts, s.kinds, s.count)
		}
		if i == 4 {
			// Examples are capped and come from the oldest held-back events.
			if len(got[0].Examples) != maxAlertExamples || got[0].Examples[0].MessageID != "mb0" {
				t.Fatalf("examples %+v", got[0].Examples)
			}
		}
	}
}

func TestAlertDueReportsWait(t *testing.T) {
	a := newAlerter(AlertConfig{MinInterval: time.Minute}, "r1", slog.New(slog.DiscardHandler))
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a.deadLetters(1, nil)
	if got, wait := a.due(t0); len(got) != 1 || wait != 0 {
		t.Fatalf("first: %d alerts, wait %v", len(got), wait)
	}
	a.deadLetters(1, nil)
	if got, wait := a.due(t0.Add(15 * time.Second)); len(got) != 0 || wait != 45*time.Second {
		t.Fatalf("held back: %d alerts, wait %v; want 0 and 45s", len(got), wait)
	}
}

func TestAlertDisableDead(t *testing.T) {
	a := newAlerter(AlertConfig{DisableDead: true}, "r1", slog.New(slog.DiscardHandler))
	a.deadLetters(3, nil)
	if got, _ := a.due(time.Now()); len(got) != 0 {
		t.Fatalf("%d alerts with DisableDead", len(got))
	}
}

func TestRedactText(t *testing.T) {
	for in, want := range map[string]string{
		`Post "https://user:s3cret@hooks.example.com/x?token=abc&n=1": dial tcp: refused`: `Post "https://user:xxxxx@hooks.example.com/x?token=xxxxx&n=1": dial tcp: refused`,
		`no url here`: `no url here`,
		`a amqp://guest:pw@h:5672/ and nats://n:1 b`: `a amqp://guest:xxxxx@h:5672/ and nats://n:1 b`,
	} {
		if got := redact.Text(in); got != want {
			t.Errorf("redact.Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAlertRouteDown: a route down for longer than RouteDown is alerted
// once, with its reason, and its recovery once more; an outage shorter
// than the threshold is not alerted at all.
func TestAlertRouteDown(t *testing.T) {
	a := newAlerter(AlertConfig{MinInterval: time.Minute, RouteDown: 5 * time.Minute}, "r1", slog.New(slog.DiscardHandler))
	t0 := time.Unix(1000, 0)
	a.routeHealth("orders", true, t0, "HTTP 503 Service Unavailable")
	a.routeHealth("billing", true, t0, "connection refused")
	a.routeHealth("billing", false, t0.Add(time.Minute), "")
	if out, wait := a.due(t0.Add(time.Minute)); len(out) != 0 || wait != 4*time.Minute {
		t.Fatalf("after 1m: %d alerts, wait %v; want none, 4m", len(out), wait)
	}
	out, _ := a.due(t0.Add(5 * time.Minute))
	if len(out) != 1 || out[0].Kind != AlertRouteDown || out[0].Route != "orders" || out[0].Reason != "HTTP 503 Service Unavailable" ||
		out[0].DownSeconds == nil || *out[0].DownSeconds != 300 {
		t.Fatalf("after 5m: %+v", out)
	}
	if out, _ := a.due(t0.Add(10 * time.Minute)); len(out) != 0 {
		t.Fatalf("the outage was alerted again: %+v", out)
	}
	a.routeHealth("orders", false, t0.Add(12*time.Minute), "")
	out, _ = a.due(t0.Add(12 * time.Minute))
	if len(out) != 1 || out[0].Kind != AlertRouteUp || *out[0].DownSeconds != 720 || !strings.Contains(out[0].Text, "up again after 12m0s") {
		t.Fatalf("recovery: %+v", out)
	}
}

// TestAlertNamesDatabase: the alerts of a relay serving one database of a
// fleet carry its name in the JSON body and the text.
func TestAlertNamesDatabase(t *testing.T) {
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	a := newAlerter(AlertConfig{WebhookURL: srv.URL, MinInterval: time.Minute}, "r1", slog.New(slog.DiscardHandler))
	a.database = "acme"
	a.deadLetters(1, nil)
	got, _ := a.due(time.Now())
	if len(got) != 1 {
		t.Fatalf("%d alerts due, want 1", len(got))
	}
	a.send(t.Context(), got[0])
	var al struct{ Text, Database string }
	if err := json.Unmarshal(body, &al); err != nil {
		t.Fatalf("alert body %q: %v", body, err)
	}
	if al.Database != "acme" || !strings.Contains(al.Text, "(database acme)") {
		t.Errorf("alert %+v does not name the database", al)
	}
}
