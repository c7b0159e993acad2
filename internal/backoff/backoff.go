// Package backoff is the wait between a message's attempts: the default
// curve, an exponential Base/Cap, or a fixed Schedule, and the horizon a
// number of attempts spans. The relay retries by it; the inbox sizes its
// records' retention by its default horizon. It imports only the standard
// library.
package backoff

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Policy is outbox.RetryPolicy (the same fields, see there): the backoff
// between attempts.
type Policy struct {
	Base     time.Duration
	Cap      time.Duration
	Schedule []time.Duration
}

// The default backoff (no Base, no Schedule) is a curve, not a doubling:
// the wait after failed attempt n is at most n⁵ seconds (1 s, 32 s, 4 min,
// 17 min, 52 min, 2.2 h, 4.7 h, 9.1 h, 16.4 h), bounded by Cap
// (DefaultRetryCap, outbox.DefaultRetryCap), and drawn from the top
// quarter below that ceiling. A failure that is a blip costs its message,
// and every later message of its key, about a second; the default ten
// attempts still span 33.6 h at most (Horizon) and 25.2 h at least
// (MinHorizon), so a consumer broken for a day does not turn its messages
// dead — about as long as the big webhook senders keep retrying (the
// Standard Webhooks schedule a little over a day, Stripe up to three
// days). An outage of the destination costs no attempts (route health);
// these are for failures that are the message's.
const (
	DefaultRetryCap = 24 * time.Hour
	// curveUnit and curvePower make the default curve: the ceiling after
	// failed attempt n is n^curvePower curveUnits.
	curveUnit  = time.Second
	curvePower = 5
	// curveFlat is an attempt from which the curve is at Cap whatever Cap
	// is (n⁵ s passes the longest time.Duration at n = 99).
	curveFlat = 90
)

// Check names the bad field of a policy found at field (e.g.
// "RelayConfig.Retry").
func (p *Policy) Check(field string) error {
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

func (p Policy) withDefaults() Policy {
	if p.Cap == 0 {
		p.Cap = DefaultRetryCap
	}
	if p.Cap < p.Base {
		p.Cap = p.Base
	}
	return p
}

// curve reports whether p is the default curve: neither Base nor Schedule.
func (p Policy) curve() bool { return p.Base == 0 && len(p.Schedule) == 0 }

// Ceiling is the longest wait after the failed attempt number attempt
// (1-based).
func (p Policy) Ceiling(attempt int) time.Duration {
	p = p.withDefaults()
	if attempt < 1 {
		attempt = 1
	}
	if len(p.Schedule) > 0 {
		return p.Schedule[min(attempt, len(p.Schedule))-1]
	}
	if p.Base == 0 {
		if attempt >= curveFlat {
			return p.Cap
		}
		d := curveUnit
		for range curvePower {
			d *= time.Duration(attempt)
		}
		return min(d, p.Cap)
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

// Floor is the shortest wait after the failed attempt number attempt: the
// schedule's entry; a quarter below the ceiling on the default curve; 0
// with the exponential backoff's full jitter.
func (p Policy) Floor(attempt int) time.Duration {
	c := p.Ceiling(attempt)
	switch {
	case len(p.Schedule) > 0:
		return c
	case p.curve():
		return c - c/4
	}
	return 0
}

// Delay is the wait after failed attempt number attempt: the schedule's
// entry, or a uniform draw from [Floor(attempt), Ceiling(attempt)).
func (p Policy) Delay(attempt int) time.Duration {
	c, f := p.Ceiling(attempt), p.Floor(attempt)
	if c <= f {
		return c
	}
	return f + rand.N(c-f)
}

// Horizon is the longest a message can keep being retried under this
// policy before it goes dead: the sum of the ceilings of its first
// maxAttempts-1 waits (0 for maxAttempts ≤ 1). Consumers keep dedupe
// records at least this long.
func (p Policy) Horizon(maxAttempts int) time.Duration {
	return p.sum(maxAttempts, p.Ceiling)
}

// MinHorizon is the shortest a message failing every attempt is retried
// before it goes dead: the sum of the floors of its first maxAttempts-1
// waits.
func (p Policy) MinHorizon(maxAttempts int) time.Duration {
	return p.sum(maxAttempts, p.Floor)
}

func (p Policy) sum(maxAttempts int, wait func(int) time.Duration) time.Duration {
	var total time.Duration
	for n := 1; n < maxAttempts; n++ {
		c := wait(n)
		if total > math.MaxInt64-c {
			return math.MaxInt64
		}
		total += c
	}
	return total
}
