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
		{"default first", outbox.RetryPolicy{}, 1, time.Second},
		{"default second", outbox.RetryPolicy{}, 2, 32 * time.Second},
		{"default fifth", outbox.RetryPolicy{}, 5, 3125 * time.Second},
		{"default ninth", outbox.RetryPolicy{}, 9, 59049 * time.Second},
		{"default capped at a day", outbox.RetryPolicy{}, 12, outbox.DefaultRetryCap},
		{"default far out", outbox.RetryPolicy{}, 1_000_000, outbox.DefaultRetryCap},
		{"attempt zero is the first", outbox.RetryPolicy{}, 0, time.Second},
		{"negative attempt is the first", outbox.RetryPolicy{}, -5, time.Second},
		{"cap alone bounds the curve", outbox.RetryPolicy{Cap: time.Hour}, 6, time.Hour},
		{"cap alone keeps the curve's start", outbox.RetryPolicy{Cap: time.Hour}, 2, 32 * time.Second},
		{"base alone doubles to the default cap", outbox.RetryPolicy{Base: 5 * time.Minute}, 10, outbox.DefaultRetryCap},
		{"base alone", outbox.RetryPolicy{Base: 5 * time.Minute}, 3, 20 * time.Minute},
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
		{Cap: time.Hour},
		{Cap: math.MaxInt64},
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

func TestRetryPolicyDelayCurve(t *testing.T) {
	t.Parallel()
	var p outbox.RetryPolicy // the default
	for attempt := 1; attempt <= 12; attempt++ {
		c, f := p.Ceiling(attempt), p.Floor(attempt)
		if f != c-c/4 {
			t.Fatalf("Floor(%d) = %v, want ¾ of the ceiling %v", attempt, f, c)
		}
		var low, high bool
		for range 2000 {
			d := p.Delay(attempt)
			if d < f || d >= c {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v)", attempt, d, f, c)
			}
			low = low || d < f+(c-f)/4
			high = high || d >= c-(c-f)/4
		}
		if !low || !high {
			t.Errorf("Delay(%d) over 2000 draws never fell in the lowest or highest quarter of [%v, %v): not jittered", attempt, f, c)
		}
	}
}

// TestRetryDefaults: the default policy retries a blip within about a
// second and a message failing every time for at least a day over the
// default 10 attempts (the max_attempts column default).
func TestRetryDefaults(t *testing.T) {
	t.Parallel()
	var p outbox.RetryPolicy
	if c := p.Ceiling(1); c > time.Second {
		t.Errorf("first wait at most %v, want at most 1s", c)
	}
	if f := p.Floor(1); f < 500*time.Millisecond {
		t.Errorf("first wait at least %v, want at least 500ms (jitter, not an immediate retry)", f)
	}
	if h := p.MinHorizon(10); h < 24*time.Hour {
		t.Errorf("10 attempts span at least %v, want at least 24h", h)
	}
	if h := p.Horizon(10); h > 48*time.Hour {
		t.Errorf("10 attempts span up to %v, want at most 48h", h)
	}
	if got := (outbox.RetryPolicy{Cap: outbox.DefaultRetryCap}).Horizon(10); got != p.Horizon(10) {
		t.Errorf("Cap set to its default changes the horizon: %v, want %v", got, p.Horizon(10))
	}
}

func FuzzRetryPolicyCeiling(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Hour), 5)
	f.Add(int64(1), int64(1)<<62, 100)
	f.Add(int64(0), int64(0), 0)
	f.Add(int64(0), int64(math.MaxInt64), 98)
	f.Fuzz(func(t *testing.T, base, cp int64, attempt int) {
		if base < 0 || cp < 0 {
			return // rejected by the relay's configuration check
		}
		attempt %= 10_000
		p := outbox.RetryPolicy{Base: time.Duration(base), Cap: time.Duration(cp)}
		c := p.Ceiling(attempt)
		limit := max(p.Base, p.Cap)
		if p.Cap == 0 {
			limit = max(p.Base, outbox.DefaultRetryCap)
		}
		if c <= 0 || c > limit {
			t.Fatalf("%+v: Ceiling(%d) = %v, want in (0, %v]", p, attempt, c, limit)
		}
		fl := p.Floor(attempt)
		if d := p.Delay(attempt); d < fl || d > c || (d == c && fl < c) {
			t.Fatalf("%+v: Delay(%d) = %v, want in [%v, %v)", p, attempt, d, fl, c)
		}
	})
}

// horizonTable is the retry-horizon table of docs/design.md ("Retry
// defaults"), computed: how long a message with the default 10 attempts
// is retried before it goes dead under each policy.
func horizonTable() string {
	rows := []struct {
		name     string
		policy   outbox.RetryPolicy
		attempts int
	}{
		{"before: full jitter 5 min → 24 h", outbox.RetryPolicy{Base: 5 * time.Minute, Cap: 24 * time.Hour}, 10},
		{"now: n⁵ s, top-quarter jitter (the default)", outbox.RetryPolicy{}, 10},
		{"Standard Webhooks' example schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h", outbox.RetryPolicy{Schedule: []time.Duration{
			5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}}, 8},
	}
	var b strings.Builder
	b.WriteString("| policy | attempts | first wait | horizon | at least | on average |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		h, lo := r.policy.Horizon(r.attempts), r.policy.MinHorizon(r.attempts)
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", r.name, r.attempts, span(r.policy.Floor(1), r.policy.Ceiling(1)),
			human(h), human(lo), human(lo+(h-lo)/2))
	}
	return b.String()
}

// scheduleTable is the default schedule's table of docs/design.md
// ("Retry defaults"): each wait's bounds and where a message failing
// every attempt stands after it.
func scheduleTable() string {
	var p outbox.RetryPolicy
	var b strings.Builder
	b.WriteString("| after failed attempt | waits | retried by (cumulative) |\n|---|---|---|\n")
	var lo, hi time.Duration
	for n := 1; n < 10; n++ {
		f, c := p.Floor(n), p.Ceiling(n)
		lo, hi = lo+f, hi+c
		fmt.Fprintf(&b, "| %d | %s | %s |\n", n, span(f, c), span(lo, hi))
	}
	fmt.Fprintf(&b, "| 10 | dead (`max_attempts` 10) | |\n")
	return b.String()
}

func span(lo, hi time.Duration) string {
	if lo == hi {
		return human(hi)
	}
	return human(lo) + " – " + human(hi)
}

// human writes a duration the way the docs do: 0.75 s, 8 min 31 s, 42.6 h.
func human(d time.Duration) string {
	switch {
	case d < time.Minute && d%time.Second != 0:
		return fmt.Sprintf("%g s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour && d%time.Minute == 0:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}

// TestRetryHorizonTable: docs/design.md carries the schedule and horizons
// this code computes.
func TestRetryHorizonTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{scheduleTable(), horizonTable()} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/design.md does not carry the computed retry table; put this table there:\n%s", want)
		}
	}
}
