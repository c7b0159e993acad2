package relay

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// Envelope is a message on its way to a destination. Its fields are those
// of outbox.Envelope, in the same order with the same types, so that the
// facade converts pointers between the two without copying.
type Envelope struct {
	ID          string
	Topic       string
	Key         string
	Destination string
	Payload     []byte
	Headers     map[string]string
	Attempt     int
	CreatedAt   time.Time
}

// Publisher delivers envelopes to one kind of destination; see
// outbox.Publisher for the contract.
type Publisher interface {
	Publish(ctx context.Context, batch []*Envelope) []error
}

// Checker answers whether a destination already has a message; see
// outbox.Checker.
type Checker interface {
	Delivered(ctx context.Context, env *Envelope) (bool, error)
}

// Route sends the messages whose topic matches Pattern to Publisher; see
// outbox.Route.
type Route struct {
	Pattern     string
	Publisher   Publisher
	Destination string
	Name        string // "" is Pattern
	Retry       *RetryPolicy
	Checker     Checker // nil: none
	// Runs: Publisher takes a run of one key's messages in one call and
	// fails the rest of the run after a failure (see outbox.RunPublisher).
	Runs bool
	// MaxInFlight bounds the route's messages being published at once
	// across the relay's workers; 0: no bound.
	MaxInFlight int
	// Rate bounds the route's messages per second (a token bucket); 0:
	// no bound.
	Rate float64
	// ProbeMin and ProbeMax bound the interval between probes of a route
	// that is down; 0: DefaultProbeMin, DefaultProbeMax.
	ProbeMin, ProbeMax time.Duration
	// MaxRetryAfter bounds the wait a failure may ask for (a hold of the
	// route); 0: DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// MaxRetryAge bounds the retrying of the route's messages by age;
	// 0: Config.MaxRetryAge.
	MaxRetryAge time.Duration
	// Sealed is what the route does with a sealed payload: SealedOpen
	// ("" too) or SealedPass.
	Sealed string
}

// The wire headers the relay sets. outbox.Header* are the same names.
const (
	HeaderTopic          = "outbox-topic"
	HeaderBusinessKey    = "outbox-business-key"
	HeaderContentType    = "content-type"
	HeaderTransferEncode = "content-transfer-encoding"
	HeaderTraceParent    = "traceparent"
	HeaderTraceState     = "tracestate"
	// DefaultContentType is the content type of a message without one.
	DefaultContentType = "application/json"
	// TextContentType is the content type of a row written without one
	// whose payload is not JSON.
	TextContentType = "text/plain; charset=utf-8"
)

// Class is how the relay treats a failed publish; outbox.ErrorClass has
// the same values.
type Class int

// The error classes.
const (
	ClassTransient Class = iota
	ClassPermanent
	ClassUnavailable
	ClassUnknown
)

func (c Class) String() string {
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
	class      Class
	retryAfter time.Duration
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() error { return e.err }

// Mark returns err marked with class and, for transient errors, the wait
// the destination asked for; nil stays nil.
func Mark(err error, class Class, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: class, retryAfter: retryAfter}
}

// ClassOf returns the class of a publish error and the wait it asks for:
// its mark, else unknown for deadlines and timeouts, else transient.
func ClassOf(err error) (Class, time.Duration) {
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

// oneLine keeps an error fit for last_error and logs: one line of UTF-8
// text without NUL (PostgreSQL refuses both in text), at most 1,000 bytes
// and an ellipsis. Errors may quote what a row or a destination held.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	}
	if len(s) > 1000 {
		cut := 1000
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// unknownErr marks err as an attempt of unknown outcome.
func unknownErr(err error) error { return Mark(err, ClassUnknown, 0) }
