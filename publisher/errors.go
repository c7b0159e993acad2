package publisher

import (
	"context"
	"errors"
	"time"
)

// ErrorClass is how the relay treats a failed publish.
type ErrorClass int

// The error classes.
const (
	// ClassTransient: retry with backoff, counting the attempt.
	ClassTransient ErrorClass = iota
	// ClassPermanent: dead at once.
	ClassPermanent
	// ClassUnavailable: the destination is down; the route goes down at
	// once and the attempt is not counted.
	ClassUnavailable
	// ClassUnknown: the message may have been delivered; retry, asking the
	// route's Checker first.
	ClassUnknown
)

func (c ErrorClass) String() string {
	switch c {
	case ClassPermanent:
		return "permanent"
	case ClassUnavailable:
		return "unavailable"
	case ClassUnknown:
		return "unknown"
	}
	return "transient"
}

type classified struct {
	err        error
	class      ErrorClass
	retryAfter time.Duration
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() error { return e.err }

func mark(err error, class ErrorClass, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: class, retryAfter: retryAfter}
}

func classOf(err error) (ErrorClass, time.Duration) {
	var c *classified
	if errors.As(err, &c) {
		return c.class, c.retryAfter
	}
	var te interface{ Timeout() bool }
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &te) && te.Timeout()) {
		return ClassUnknown, 0
	}
	return ClassTransient, 0
}

// Classify returns the class of a publish error (see Permanent,
// Unavailable, Unknown, RetryAfter); unmarked errors are transient, except
// deadlines and timeouts, which are unknown. The outermost mark wins.
func Classify(err error) ErrorClass {
	c, _ := classOf(err)
	return c
}

// RetryAfterOf returns the wait requested with RetryAfter, 0 if none.
func RetryAfterOf(err error) time.Duration {
	_, d := classOf(err)
	return d
}

// Permanent marks err as a failure that retrying cannot fix (the
// destination rejected the message, it is too large, it is invalid). The
// relay moves the message to dead at once. nil stays nil.
func Permanent(err error) error { return mark(err, ClassPermanent, 0) }

// RetryAfter marks err as transient and asks for the next attempt no sooner
// than d (HTTP 429/503 Retry-After, broker throttling): the relay holds the
// route that long. nil stays nil.
func RetryAfter(err error, d time.Duration) error { return mark(err, ClassTransient, d) }

// Unavailable marks err as "the destination cannot be reached at all"
// (connection refused, broker down, queue missing, access denied). The
// relay never counts the attempt against the message: it takes the route
// down and probes it until it answers, or, when other messages of the
// route go through, puts this one back for a while. nil stays nil.
func Unavailable(err error) error { return mark(err, ClassUnavailable, 0) }

// Unknown marks err as "the message may or may not have been delivered"
// (a timeout after sending). The relay retries; if the route has a Checker
// it first asks whether the destination already has the message.
// Deadline and timeout errors are treated as Unknown without marking.
// nil stays nil.
func Unknown(err error) error { return mark(err, ClassUnknown, 0) }
