package outbox

import (
	"time"

	"github.com/txoutbox/outbox/internal/relay"
)

// Retry policy defaults. The default policy (the zero RetryPolicy) retries
// fast first and long in total: the wait after failed attempt n is at most
// n⁵ seconds — 1 s, 32 s, 4 min, 17 min, 52 min, 2.2 h, 4.7 h, 9.1 h,
// 16.4 h — drawn from the top quarter below that ceiling. A blip costs a
// message (and the later messages of its key, which wait behind it) about
// a second, while the default 10 attempts span 25.2 h to 33.6 h
// (RetryPolicy.MinHorizon, RetryPolicy.Horizon) before a message goes
// dead: a consumer broken for a day loses nothing, about as long as the
// big webhook senders retry (the Standard Webhooks schedule a little over
// a day, Stripe up to 3 days). A destination that is down costs no
// attempts at all (see Route): these are for failures that are the
// message's own.
const (
	// DefaultRetryBase was the default first ceiling of the exponential
	// backoff, when it was the default policy.
	//
	// Deprecated: the default policy is the n⁵ s curve (see RetryPolicy);
	// a policy takes the exponential backoff only when it sets Base.
	DefaultRetryBase = 5 * time.Minute
	// DefaultRetryCap is the largest backoff, of the default curve and of
	// the exponential backoff alike (24 h).
	DefaultRetryCap = relay.DefaultRetryCap
)

// RetryPolicy decides how long a failed message waits before its next
// attempt. The zero value is the default curve: the wait after failed
// attempt n is drawn uniformly from [¾·c, c), c = min(n⁵ s, Cap).
type RetryPolicy struct {
	// Base, when set, selects the exponential backoff: it is the ceiling
	// after the first failure and doubles with every further failure up
	// to Cap, and the actual wait is drawn uniformly from [0, ceiling)
	// (full jitter). Defaults to 0, the default curve (see RetryPolicy).
	Base time.Duration
	// Cap bounds the backoff, the default curve's as well as the
	// exponential one's: setting only Cap keeps the curve, flat at Cap
	// from where it passes it. Defaults to DefaultRetryCap (24 h).
	Cap time.Duration
	// Schedule, when set, replaces both: the n-th retry waits
	// Schedule[n-1], and the last entry repeats (e.g. 10s, 30s, 1m, 5m).
	// No jitter is added.
	Schedule []time.Duration
}

// Ceiling is the longest wait after the failed attempt number attempt
// (1-based).
func (p RetryPolicy) Ceiling(attempt int) time.Duration { return relay.RetryPolicy(p).Ceiling(attempt) }

// Floor is the shortest wait after the failed attempt number attempt: the
// schedule's entry, ¾ of the ceiling on the default curve, 0 with the
// exponential backoff's full jitter.
func (p RetryPolicy) Floor(attempt int) time.Duration { return relay.RetryPolicy(p).Floor(attempt) }

// Delay is the wait after failed attempt number attempt: the schedule's
// entry, or a uniform draw from [Floor(attempt), Ceiling(attempt)).
func (p RetryPolicy) Delay(attempt int) time.Duration { return relay.RetryPolicy(p).Delay(attempt) }

// Horizon is the longest a message can keep being retried under this
// policy before it goes dead: the sum of the ceilings of its first
// maxAttempts-1 waits (0 for maxAttempts ≤ 1). Consumers keep dedupe
// records at least this long.
func (p RetryPolicy) Horizon(maxAttempts int) time.Duration {
	return relay.RetryPolicy(p).Horizon(maxAttempts)
}

// MinHorizon is the shortest a message failing every attempt is retried
// before it goes dead: the sum of the floors of its first maxAttempts-1
// waits (0 under full jitter).
func (p RetryPolicy) MinHorizon(maxAttempts int) time.Duration {
	return relay.RetryPolicy(p).MinHorizon(maxAttempts)
}
