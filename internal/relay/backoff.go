package relay

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy is outbox.RetryPolicy (the same fields, see there): the
// backoff between attempts.
type RetryPolicy struct {
	Base     time.Duration
	Cap      time.Duration
	Schedule []time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Base == 0 {
		p.Base = time.Second
	}
	if p.Cap == 0 {
		p.Cap = time.Hour
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
