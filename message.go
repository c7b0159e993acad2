package outbox

import (
	"errors"
	"time"

	"github.com/txoutbox/outbox/internal/enqueue"
	"github.com/txoutbox/outbox/internal/store"
)

// Message is one message to enqueue.
type Message struct {
	// Topic routes the message, e.g. "order.created": dot-separated
	// segments of letters, digits, '_', '-' and ':'. Required.
	Topic string
	// Key is the business key: messages with the same key are delivered in
	// the order they were enqueued, and it is the Kafka record key.
	// Optional; at most 255 bytes.
	Key string
	// Payload is the body, delivered byte for byte. A payload that is not
	// UTF-8 text is stored base64-encoded and decoded before publishing.
	Payload []byte
	// ContentType of the payload. Defaults to "application/json", in which
	// case the payload must be valid JSON.
	ContentType string
	// Headers travel with the message as broker headers. Names are
	// case-insensitive and stored lower case; names starting with
	// "outbox-" are reserved.
	Headers map[string]string
	// ID is the message id (a UUID). Defaults to a new time-ordered UUID.
	ID string
	// Delay holds the message back for this long after the transaction's
	// database time. Later messages of the same key wait behind it.
	Delay time.Duration
	// NotBefore, when set, is the earliest delivery time; it wins over
	// Delay.
	NotBefore time.Time
	// MaxAttempts bounds publish attempts before the message goes dead.
	// Defaults to 10.
	MaxAttempts int
	// ExpiresAt, when set, is when the message stops being worth
	// delivering: if it is not confirmed by then (database time), the
	// relay never sends it, moves it to the status expired with the
	// reason, and the later messages of its key go on; it can be
	// requeued like a dead letter (without its expiry). A message being
	// published when it expires is not recalled. Stored in the column
	// expires_at (schema version 19), which plain-SQL producers may set
	// too. Defaults to the zero time: never.
	ExpiresAt time.Time
	// TTL, when set, expires the message this long after its enqueue, by
	// the database clock (expires_at = now() + TTL): the relative form of
	// ExpiresAt, which it must not be given with. Defaults to
	// Config.TTL: never, unless the producer says otherwise.
	TTL time.Duration
	// SealSubject names the data subject (e.g. "customer:42") whose own
	// key seals the payload, created on first use by the producer's
	// seal.SubjectKeyProvider: erasing that key makes every stored
	// message of the subject unreadable. Needs Config.Seal; the message
	// is sealed whatever its topic. Defaults to "": the current key
	// seals the payloads Config.Seal selects.
	SealSubject string
}

// kindErrors are the sentinel errors of the kinds of enqueue.Invalid.
var kindErrors = [...]error{
	enqueue.InvalidTopic:    ErrInvalidTopic,
	enqueue.InvalidKey:      ErrInvalidKey,
	enqueue.PayloadTooLarge: ErrPayloadTooLarge,
	enqueue.InvalidJSON:     ErrInvalidJSON,
	enqueue.InvalidHeader:   ErrInvalidHeader,
	enqueue.InvalidMessage:  ErrInvalidMessage,
}

// validationError is err, with a rejected message (*enqueue.Invalid) as
// the *ValidationError that reports it.
func validationError(err error) error {
	var inv *enqueue.Invalid
	if !errors.As(err, &inv) {
		return err
	}
	return &ValidationError{Index: inv.Index, Field: inv.Field, Err: kindErrors[inv.Kind], Detail: inv.Detail}
}

// prepare validates m and renders it as a row (enqueue.Prepare). i is its
// index in the call; trace holds the caller's trace context headers,
// which win over the message's own.
func (m *Message) prepare(i int, maxPayload int, trace map[string]string) (store.NewMessage, error) {
	row, err := enqueue.Prepare((*enqueue.Message)(m), i, maxPayload, trace)
	return row, validationError(err)
}
