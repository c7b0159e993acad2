package outbox

import (
	"errors"
	"fmt"
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
