package outbox

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// Retry policy defaults.
const (
	// DefaultRetryBase is the first backoff ceiling.
	DefaultRetryBase = time.Second
	// DefaultRetryCap is the largest backoff.
	DefaultRetryCap = time.Hour
)

// RetryPolicy decides how long a failed message waits before its next
// attempt.
type RetryPolicy struct {
	// Base is the backoff ceiling after the first failure; it doubles with
	// every further failure up to Cap, and the actual wait is drawn
	// uniformly from [0, ceiling) (full jitter). Defaults to 1 s.
	Base time.Duration
	// Cap bounds the backoff. Defaults to 1 h.
	Cap time.Duration
	// Schedule, when set, replaces the exponential backoff: the n-th retry
	// waits Schedule[n-1], and the last entry repeats (e.g. 10s, 30s, 1m,
	// 5m). No jitter is added.
	Schedule []time.Duration
}

func (p *RetryPolicy) validate() error {
	if p.Base < 0 || p.Cap < 0 {
		return errors.New("Retry: Base and Cap must not be negative")
	}
	for _, d := range p.Schedule {
		if d < 0 {
			return errors.New("Retry: Schedule entries must not be negative")
		}
	}
	return nil
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Base == 0 {
		p.Base = DefaultRetryBase
	}
	if p.Cap == 0 {
		p.Cap = DefaultRetryCap
	}
	if p.Cap < p.Base {
		p.Cap = p.Base
	}
	return p
}

// Ceiling is the longest wait after the failed attempt number attempt
// (1-based).
func (p RetryPolicy) Ceiling(attempt int) time.Duration {
	p = p.withDefaults()
	if attempt < 1 {
		attempt = 1
	}
	if len(p.Schedule) > 0 {
		return p.Schedule[min(attempt, len(p.Schedule))-1]
	}
	d := p.Base
	for i := 1; i < attempt && d < p.Cap; i++ {
		if d > p.Cap/2 {
			return p.Cap // doubling would pass the cap (or overflow)
		}
		d *= 2
	}
	return min(d, p.Cap)
}

// Delay is the wait after failed attempt number attempt: the schedule's
// entry, or a uniform draw from [0, Ceiling(attempt)).
func (p RetryPolicy) Delay(attempt int) time.Duration {
	c := p.Ceiling(attempt)
	if len(p.Schedule) > 0 || c <= 0 {
		return c
	}
	return rand.N(c)
}

// Horizon is the longest a message can keep being retried under this
// policy before it goes dead: the sum of the ceilings of its first
// maxAttempts-1 waits (0 for maxAttempts ≤ 1). Consumers keep dedupe
// records at least this long.
func (p RetryPolicy) Horizon(maxAttempts int) time.Duration {
	var total time.Duration
	for n := 1; n < maxAttempts; n++ {
		c := p.Ceiling(n)
		if total > math.MaxInt64-c {
			return math.MaxInt64
		}
		total += c
	}
	return total
}
