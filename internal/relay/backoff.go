package relay

import (
	"fmt"
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

// The default backoff (outbox.DefaultRetryBase, DefaultRetryCap): full
// jitter from a 5 min ceiling doubling to 24 h, so that the default ten
// attempts span 42.6 h (RetryPolicy.Horizon) — about as long as the big
// webhook senders keep retrying (Stripe up to three days, the Standard
// Webhooks schedule a little over a day). An outage of the destination
// costs no attempts (route health); these are for failures that are the
// message's.
const (
	DefaultRetryBase = 5 * time.Minute
	DefaultRetryCap  = 24 * time.Hour
)

// check names the bad field of a policy found at field (e.g.
// "RelayConfig.Retry").
func (p *RetryPolicy) check(field string) error {
	if p.Base < 0 || p.Cap < 0 {
		return fmt.Errorf("outbox: %s: Base and Cap must not be negative", field)
	}
	for _, d := range p.Schedule {
		if d < 0 {
			return fmt.Errorf("outbox: %s: Schedule entries must not be negative", field)
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
