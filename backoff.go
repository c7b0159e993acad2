package outbox

import (
	"time"

	"github.com/txoutbox/outbox/internal/relay"
)

// Retry policy defaults: with the default 10 attempts a failing message
// is retried for up to 42.6 h (RetryPolicy.Horizon; half that on average
// with the jitter) before it goes dead — about as long as the big webhook
// senders retry (Stripe up to 3 days; the Standard Webhooks schedule a
// little over a day). A destination that is down costs no attempts at
// all (see Route): these are for failures that are the message's own.
const (
	// DefaultRetryBase is the first backoff ceiling.
	DefaultRetryBase = 5 * time.Minute
	// DefaultRetryCap is the largest backoff.
	DefaultRetryCap = 24 * time.Hour
)

// RetryPolicy decides how long a failed message waits before its next
// attempt.
type RetryPolicy struct {
	// Base is the backoff ceiling after the first failure; it doubles with
	// every further failure up to Cap, and the actual wait is drawn
	// uniformly from [0, ceiling) (full jitter). Defaults to
	// DefaultRetryBase (5 min).
	Base time.Duration
	// Cap bounds the backoff. Defaults to DefaultRetryCap (24 h).
	Cap time.Duration
	// Schedule, when set, replaces the exponential backoff: the n-th retry
	// waits Schedule[n-1], and the last entry repeats (e.g. 10s, 30s, 1m,
	// 5m). No jitter is added.
	Schedule []time.Duration
}

// Ceiling is the longest wait after the failed attempt number attempt
// (1-based).
func (p RetryPolicy) Ceiling(attempt int) time.Duration { return relay.RetryPolicy(p).Ceiling(attempt) }

// Delay is the wait after failed attempt number attempt: the schedule's
// entry, or a uniform draw from [0, Ceiling(attempt)).
func (p RetryPolicy) Delay(attempt int) time.Duration { return relay.RetryPolicy(p).Delay(attempt) }

// Horizon is the longest a message can keep being retried under this
// policy before it goes dead: the sum of the ceilings of its first
// maxAttempts-1 waits (0 for maxAttempts ≤ 1). Consumers keep dedupe
// records at least this long.
func (p RetryPolicy) Horizon(maxAttempts int) time.Duration {
	return relay.RetryPolicy(p).Horizon(maxAttempts)
}
