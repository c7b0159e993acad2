package outbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/txoutbox/outbox/internal/relay"
)

// Errors returned by Enqueue and the operator API. Validation errors wrap
// one of them inside a *ValidationError naming the message and field.
var (
	// ErrInvalidTopic: the topic is empty, longer than 255 characters or
	// not dot-separated segments of letters, digits, '_', '-' and ':'.
	ErrInvalidTopic = errors.New("invalid topic")
	// ErrInvalidKey: the business key is longer than 255 bytes or not UTF-8.
	ErrInvalidKey = errors.New("invalid business key")
	// ErrPayloadTooLarge: the payload is over Config.MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrInvalidJSON: the content type says JSON and the payload is not.
	ErrInvalidJSON = errors.New("payload is not valid JSON")
	// ErrInvalidHeader: a header name is empty, reserved or not printable,
	// or a value is not UTF-8.
	ErrInvalidHeader = errors.New("invalid header")
	// ErrInvalidMessage: another field is out of range (a negative delay,
	// max attempts below zero, a message id that is not a UUID).
	ErrInvalidMessage = errors.New("invalid message")
	// ErrDuplicateMessageID: a message with the same id is already in the
	// outbox (Message.ID set by the caller).
	ErrDuplicateMessageID = errors.New("duplicate message id")
	// ErrNotFound: no message has the given id.
	ErrNotFound = errors.New("message not found")
	// ErrNoRoute: no route matches the message's topic.
	ErrNoRoute = errors.New("no route")
)

// ValidationError says which message of an Enqueue call was rejected and
// why. errors.Is matches its Err (ErrInvalidTopic, …).
type ValidationError struct {
	// Index is the message's position in the call.
	Index int
	// Field is the offending field: "Topic", "Key", "Payload", …
	Field string
	// Err is one of the sentinel errors above.
	Err error
	// Detail explains, in a few words.
	Detail string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("outbox: message %d: %s: %v: %s", e.Index, e.Field, e.Err, e.Detail)
}

// Unwrap returns the sentinel error.
func (e *ValidationError) Unwrap() error { return e.Err }

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

func (c ErrorClass) String() string { return relay.Class(c).String() }

// Classify returns the class of a publish error (see Permanent,
// Unavailable, Unknown, RetryAfter); unmarked errors are transient, except
// deadlines and timeouts, which are unknown.
func Classify(err error) ErrorClass {
	c, _ := relay.ClassOf(err)
	return ErrorClass(c)
}

// RetryAfterOf returns the wait requested with RetryAfter, 0 if none.
func RetryAfterOf(err error) time.Duration {
	_, d := relay.ClassOf(err)
	return d
}

// Permanent marks err as a failure that retrying cannot fix (the
// destination rejected the message, it is too large, the destination does
// not exist). The relay moves the message to dead at once.
func Permanent(err error) error { return relay.Mark(err, relay.ClassPermanent, 0) }

// RetryAfter marks err as transient and asks for the next attempt no sooner
// than d (HTTP 429/503 Retry-After, broker flow control).
func RetryAfter(err error, d time.Duration) error { return relay.Mark(err, relay.ClassTransient, d) }

// Unavailable marks err as "the destination cannot be reached at all"
// (connection refused, broker down). The relay does not count the attempt
// against the message; it takes the route down and probes it until it answers.
func Unavailable(err error) error { return relay.Mark(err, relay.ClassUnavailable, 0) }

// Unknown marks err as "the message may or may not have been delivered"
// (a timeout after sending). The relay retries; if the route has a Checker
// it first asks whether the destination already has the message.
// Deadline and timeout errors are treated as Unknown without marking.
func Unknown(err error) error { return relay.Mark(err, relay.ClassUnknown, 0) }
