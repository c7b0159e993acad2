package relay

import "github.com/txoutbox/outbox/internal/backoff"

// RetryPolicy is the backoff between attempts (package backoff).
type RetryPolicy = backoff.Policy

// DefaultRetryCap bounds the default curve's waits.
const DefaultRetryCap = backoff.DefaultRetryCap
