package relay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// TestRetryBudget: a failure goes dead when the message is older than the
// retry budget, or when its next retry would fall past it; max_attempts
// still ends it first when it comes first; an unknown created_at is
// bounded by attempts only; a route's budget wins over the relay's.
func TestRetryBudget(t *testing.T) {
	now := time.Now()
	second := RetryPolicy{Schedule: []time.Duration{time.Second}}
	cases := []struct {
		name               string
		relayAge, routeAge time.Duration
		created            time.Time
		attempts, max      int
		want, reason       string
	}{
		{"young", 5 * time.Second, 0, now.Add(-time.Second), 2, 1000, store.StatusPending, ""},
		{"spent", 5 * time.Second, 0, now.Add(-10 * time.Second), 2, 1000, store.StatusDead, "retry budget (5s) spent after 3 attempts: boom"},
		{"next retry past it", 5 * time.Second, 0, now.Add(-4500 * time.Millisecond), 2, 1000, store.StatusDead, "retry budget (5s) spent after 3 attempts: boom"},
		{"unknown created_at", 5 * time.Second, 0, time.Time{}, 2, 1000, store.StatusPending, ""},
		{"no budget", 0, 0, now.Add(-1000 * time.Hour), 2, 1000, store.StatusPending, ""},
		{"route's budget wins", time.Hour, 5 * time.Second, now.Add(-10 * time.Second), 0, 1000, store.StatusDead, "retry budget (5s) spent after 1 attempt: boom"},
		{"route's longer budget wins", 5 * time.Second, time.Hour, now.Add(-10 * time.Second), 0, 1000, store.StatusPending, ""},
		{"attempts first", time.Hour, 0, now.Add(-time.Second), 9, 10, store.StatusDead, "max attempts (10) reached: boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Relay{cfg: Config{Retry: second, MaxRetryAge: c.relayAge}}
			rs := &routeState{Route: Route{Pattern: "*", MaxRetryAge: c.routeAge}, name: "*"}
			row := &store.Row{ID: 1, Attempts: c.attempts, MaxAttempts: c.max, CreatedAt: c.created}
			out := r.failure(rs, &item{row: row, route: rs}, errors.New("boom"))
			if out.Status != c.want || !out.CountAttempt {
				t.Fatalf("outcome %+v, want %s", out, c.want)
			}
			if c.want == store.StatusDead && out.Error != c.reason {
				t.Fatalf("reason %q, want %q", out.Error, c.reason)
			}
			if c.want == store.StatusPending && out.Delay != time.Second {
				t.Fatalf("delay %s, want the schedule's 1s", out.Delay)
			}
		})
	}
}

// TestRetryBudgetPermanent: a permanent failure is dead for its own
// reason, whatever the budget.
func TestRetryBudgetPermanent(t *testing.T) {
	r := &Relay{cfg: Config{MaxRetryAge: time.Second}}
	rs := &routeState{Route: Route{Pattern: "*"}, name: "*"}
	row := &store.Row{ID: 1, MaxAttempts: 10, CreatedAt: time.Now().Add(-time.Hour)}
	out := r.failure(rs, &item{row: row, route: rs}, publisher.Permanent(errors.New("rejected")))
	if out.Status != store.StatusDead || strings.Contains(out.Error, "budget") {
		t.Fatalf("outcome %+v, want dead for its own reason", out)
	}
}

// TestRetryBudgetRetryAfter: a wait asked for that ends past the budget
// makes the message dead now.
func TestRetryBudgetRetryAfter(t *testing.T) {
	r := &Relay{cfg: Config{Retry: RetryPolicy{Schedule: []time.Duration{time.Second}}, MaxRetryAge: 5 * time.Second}}
	rs := &routeState{Route: Route{Pattern: "*"}, name: "*"}
	row := &store.Row{ID: 1, MaxAttempts: 10, CreatedAt: time.Now().Add(-time.Second)}
	out := r.failure(rs, &item{row: row, route: rs}, publisher.RetryAfter(errors.New("busy"), 10*time.Second))
	if out.Status != store.StatusDead || !strings.HasPrefix(out.Error, "retry budget (5s) spent after 1 attempt") {
		t.Fatalf("outcome %+v, want dead on its budget", out)
	}
}

// TestRetryHorizon: the horizon is the attempts' unless the budget by age
// is shorter.
func TestRetryHorizon(t *testing.T) {
	p := RetryPolicy{Schedule: []time.Duration{time.Minute}}
	for _, c := range []struct {
		age, want time.Duration
	}{{0, 9 * time.Minute}, {time.Hour, 9 * time.Minute}, {5 * time.Minute, 5 * time.Minute}} {
		if got := RetryHorizon(p, 10, c.age); got != c.want {
			t.Errorf("max age %s: horizon %s, want %s", c.age, got, c.want)
		}
	}
}

// TestMaxRetryAgeChecked: a negative budget is a bad field.
func TestMaxRetryAgeChecked(t *testing.T) {
	c := Config{Routes: []Route{{Pattern: "*", Publisher: budgetPublisher{}, MaxRetryAge: -1}}}
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "MaxRetryAge") {
		t.Fatalf("route: %v", err)
	}
	c = Config{Routes: []Route{{Pattern: "*", Publisher: budgetPublisher{}}}, MaxRetryAge: -1}
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "RelayConfig.MaxRetryAge") {
		t.Fatalf("relay: %v", err)
	}
	// The same for the max age.
	c = Config{Routes: []Route{{Pattern: "*", Publisher: budgetPublisher{}, MaxAge: -1}}}
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "MaxAge") {
		t.Fatalf("route max age: %v", err)
	}
	c = Config{Routes: []Route{{Pattern: "*", Publisher: budgetPublisher{}}}, MaxAge: -1}
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "RelayConfig.MaxAge") {
		t.Fatalf("relay max age: %v", err)
	}
}

type budgetPublisher struct{}

func (budgetPublisher) Publish(context.Context, []*publisher.Envelope) []error { return nil }
