package outbox_test

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
)

func TestRetryPolicyCeiling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		policy  outbox.RetryPolicy
		attempt int
		want    time.Duration
	}{
		{"default first", outbox.RetryPolicy{}, 1, 5 * time.Minute},
		{"default second", outbox.RetryPolicy{}, 2, 10 * time.Minute},
		{"default fifth", outbox.RetryPolicy{}, 5, 80 * time.Minute},
		{"default capped at a day", outbox.RetryPolicy{}, 10, outbox.DefaultRetryCap},
		{"default far out", outbox.RetryPolicy{}, 1_000_000, outbox.DefaultRetryCap},
		{"attempt zero is the first", outbox.RetryPolicy{}, 0, 5 * time.Minute},
		{"negative attempt is the first", outbox.RetryPolicy{}, -5, 5 * time.Minute},
		{"custom base", outbox.RetryPolicy{Base: 100 * time.Millisecond}, 4, 800 * time.Millisecond},
		{"custom cap", outbox.RetryPolicy{Base: time.Second, Cap: 10 * time.Second}, 5, 10 * time.Second},
		{"cap below base", outbox.RetryPolicy{Base: time.Minute, Cap: time.Second}, 3, time.Minute},
		{"schedule first", outbox.RetryPolicy{Schedule: []time.Duration{10 * time.Second, 30 * time.Second, time.Minute}}, 1, 10 * time.Second},
		{"schedule third", outbox.RetryPolicy{Schedule: []time.Duration{10 * time.Second, 30 * time.Second, time.Minute}}, 3, time.Minute},
		{"schedule last repeats", outbox.RetryPolicy{Schedule: []time.Duration{10 * time.Second, 30 * time.Second, time.Minute}}, 50, time.Minute},
		{"schedule attempt zero", outbox.RetryPolicy{Schedule: []time.Duration{10 * time.Second}}, 0, 10 * time.Second},
		{"schedule wins over base", outbox.RetryPolicy{Base: time.Hour, Schedule: []time.Duration{time.Second}}, 1, time.Second},
		{"schedule zero entry", outbox.RetryPolicy{Schedule: []time.Duration{0, time.Second}}, 1, 0},
		{"schedule ignores cap", outbox.RetryPolicy{Cap: time.Second, Schedule: []time.Duration{time.Minute}}, 1, time.Minute},
	} {
		if got := tc.policy.Ceiling(tc.attempt); got != tc.want {
			t.Errorf("%s: Ceiling(%d) = %v, want %v", tc.name, tc.attempt, got, tc.want)
		}
	}
}

func TestRetryPolicyCeilingMonotone(t *testing.T) {
	t.Parallel()
	for _, p := range []outbox.RetryPolicy{
		{},
		{Base: time.Nanosecond, Cap: time.Hour},
		{Base: 3 * time.Second, Cap: 7 * time.Minute},
	} {
		cp := max(p.Cap, p.Base)
		if cp == 0 {
			cp = outbox.DefaultRetryCap
		}
		prev := time.Duration(0)
		for attempt := 1; attempt <= 200; attempt++ {
			c := p.Ceiling(attempt)
			if c < prev || c <= 0 || c > cp {
				t.Fatalf("%+v: Ceiling(%d) = %v after %v; want non-decreasing in (0, %v]", p, attempt, c, prev, cp)
			}
			prev = c
		}
		if prev != cp {
			t.Errorf("%+v: Ceiling(200) = %v, want the cap %v", p, prev, cp)
		}
	}
}

// TestRetryPolicyCeilingHugeCap: doubling must not overflow time.Duration
// when Cap is near its maximum.
func TestRetryPolicyCeilingHugeCap(t *testing.T) {
	t.Parallel()
	p := outbox.RetryPolicy{Base: time.Nanosecond, Cap: math.MaxInt64}
	prev := time.Duration(0)
	for attempt := 1; attempt <= 100; attempt++ {
		c := p.Ceiling(attempt)
		if c < prev {
			t.Fatalf("Ceiling(%d) = %v after %v: overflowed", attempt, c, prev)
		}
		prev = c
	}
}

func TestRetryPolicyDelay(t *testing.T) {
	t.Parallel()
	p := outbox.RetryPolicy{Base: 10 * time.Millisecond, Cap: 80 * time.Millisecond}
	for attempt := 1; attempt <= 6; attempt++ {
		ceiling := p.Ceiling(attempt)
		var low, high bool
		for range 2000 {
			d := p.Delay(attempt)
			if d < 0 || d >= ceiling {
				t.Fatalf("Delay(%d) = %v, want in [0, %v)", attempt, d, ceiling)
			}
			low = low || d < ceiling/4
			high = high || d >= ceiling*3/4
		}
		if !low || !high {
			t.Errorf("Delay(%d) over 2000 draws never fell in the lowest or highest quarter of [0, %v): not full jitter", attempt, ceiling)
		}
	}
}

func TestRetryPolicyDelaySchedule(t *testing.T) {
	t.Parallel()
	p := outbox.RetryPolicy{Schedule: []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute}}
	for attempt, want := range map[int]time.Duration{1: 10 * time.Second, 2: 30 * time.Second, 3: time.Minute, 4: 5 * time.Minute, 5: 5 * time.Minute, 99: 5 * time.Minute} {
		for range 10 {
			if got := p.Delay(attempt); got != want {
				t.Fatalf("Delay(%d) = %v, want exactly %v (no jitter)", attempt, got, want)
			}
		}
	}
}

func FuzzRetryPolicyCeiling(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Hour), 5)
	f.Add(int64(1), int64(1)<<62, 100)
	f.Add(int64(0), int64(0), 0)
	f.Fuzz(func(t *testing.T, base, cp int64, attempt int) {
		if base < 0 || cp < 0 {
			return // rejected by the relay's configuration check
		}
		attempt %= 10_000
		p := outbox.RetryPolicy{Base: time.Duration(base), Cap: time.Duration(cp)}
		c := p.Ceiling(attempt)
		b := p.Base
		if b == 0 {
			b = outbox.DefaultRetryBase
		}
		limit := max(b, p.Cap)
		if p.Cap == 0 {
			limit = max(b, outbox.DefaultRetryCap)
		}
		if c <= 0 || c > limit {
			t.Fatalf("%+v: Ceiling(%d) = %v, want in (0, %v]", p, attempt, c, limit)
		}
		if d := p.Delay(attempt); d < 0 || d >= c {
			t.Fatalf("%+v: Delay(%d) = %v, want in [0, %v)", p, attempt, d, c)
		}
	})
}

// horizonTable is the retry-horizon table of docs/design.md ("Retry
// defaults"), computed: the longest a message with the default 10
// attempts is retried before it goes dead under each policy.
func horizonTable() string {
	rows := []struct {
		name     string
		policy   outbox.RetryPolicy
		attempts int
	}{
		{"before: full jitter 1 s → 1 h", outbox.RetryPolicy{Base: time.Second, Cap: time.Hour}, 10},
		{"now: full jitter 5 min → 24 h (the default)", outbox.RetryPolicy{}, 10},
		{"Standard Webhooks' example schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h", outbox.RetryPolicy{Schedule: []time.Duration{
			5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}}, 8},
	}
	var b strings.Builder
	b.WriteString("| policy | attempts | first wait at most | horizon | on average |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		h := r.policy.Horizon(r.attempts)
		avg := h / 2
		if len(r.policy.Schedule) > 0 {
			avg = h // a schedule has no jitter
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", r.name, r.attempts, human(r.policy.Ceiling(1)), human(h), human(avg))
	}
	return b.String()
}

// human writes a duration the way the docs do: 8 min 31 s, 42.6 h.
func human(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour && d%time.Minute == 0:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}

// TestRetryHorizonTable: docs/design.md carries the horizons this code
// computes.
func TestRetryHorizonTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := horizonTable(); !strings.Contains(string(doc), want) {
		t.Fatalf("docs/design.md does not carry the computed retry horizons; put this table there:\n%s", want)
	}
}
