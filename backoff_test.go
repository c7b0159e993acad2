package outbox_test

import (
	"math"
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
		{"default second", outbox.RetryPolicy{}, 2, 2 * time.Second},
		{"default fifth", outbox.RetryPolicy{}, 5, 16 * time.Second},
		{"default capped at an hour", outbox.RetryPolicy{}, 13, outbox.DefaultRetryCap},
		{"default far out", outbox.RetryPolicy{}, 1_000_000, outbox.DefaultRetryCap},
		{"attempt zero is the first", outbox.RetryPolicy{}, 0, time.Second},
		{"negative attempt is the first", outbox.RetryPolicy{}, -5, time.Second},
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
