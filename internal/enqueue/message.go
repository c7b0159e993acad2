// Package enqueue turns the messages a producer enqueues into rows of the
// outbox table: their validation, the sealing of their payloads (package
// seal) and the claim check of the large ones (package claimcheck), and
// the signal that wakes the relays once the rows are in. Package outbox
// holds the API (Producer, Config, Message) and converts its types to
// these, which have the same fields.
package enqueue

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"mime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"

	"github.com/txoutbox/outbox/internal/msgcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// Message is outbox.Message, field for field; that type documents them.
type Message struct {
	Topic       string
	Key         string
	Payload     []byte
	ContentType string
	Headers     map[string]string
	ID          string
	Delay       time.Duration
	NotBefore   time.Time
	MaxAttempts int
	ExpiresAt   time.Time
	TTL         time.Duration
	SealSubject string
}

// Kind is what is wrong with a rejected message: each kind stands for
// one of the API's sentinel errors (outbox.ErrInvalidTopic, …).
type Kind int

// Kinds of rejection.
const (
	InvalidTopic    Kind = iota // outbox.ErrInvalidTopic
	InvalidKey                  // outbox.ErrInvalidKey
	PayloadTooLarge             // outbox.ErrPayloadTooLarge
	InvalidJSON                 // outbox.ErrInvalidJSON
	InvalidHeader               // outbox.ErrInvalidHeader
	InvalidMessage              // outbox.ErrInvalidMessage
)

// Invalid says which message of a call is rejected and why; the API
// reports it as an *outbox.ValidationError wrapping the Kind's error.
type Invalid struct {
	// Index is the message's position in the call.
	Index int
	// Field is the offending field: "Topic", "Key", "Payload", …
	Field string
	// Kind is what is wrong.
	Kind Kind
	// Detail explains, in a few words.
	Detail string
}

func (e *Invalid) Error() string {
	return "outbox: message " + strconv.Itoa(e.Index) + ": " + e.Field + ": " + e.Detail
}

// isJSONType reports whether a content type denotes JSON.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// TraceHeaders returns the W3C trace context (traceparent, tracestate) of
// the span in ctx, or nil when there is none.
func TraceHeaders(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// Prepare validates m and renders it as a row. i is its index in the
// call; trace holds the caller's trace context headers, which win over
// the message's own.
func Prepare(m *Message, i int, maxPayload int, trace map[string]string) (store.NewMessage, error) {
	bad := func(field string, kind Kind, detail string) (store.NewMessage, error) {
		return store.NewMessage{}, &Invalid{Index: i, Field: field, Kind: kind, Detail: detail}
	}
	if !msgcheck.Topic(m.Topic) {
		detail := msgcheck.TopicRule
		if m.Topic == "" {
			detail = "topic is required"
		}
		return bad("Topic", InvalidTopic, detail)
	}
	if detail := msgcheck.KeyError(m.Key); detail != "" {
		return bad("Key", InvalidKey, detail)
	}
	if len(m.Payload) > maxPayload {
		return bad("Payload", PayloadTooLarge, strconv.Itoa(len(m.Payload))+" bytes, limit "+strconv.Itoa(maxPayload))
	}
	if m.Delay < 0 {
		return bad("Delay", InvalidMessage, "negative delay")
	}
	if m.MaxAttempts < 0 {
		return bad("MaxAttempts", InvalidMessage, "negative")
	}
	if m.TTL < 0 {
		return bad("TTL", InvalidMessage, "negative")
	}
	if m.TTL > 0 && !m.ExpiresAt.IsZero() {
		return bad("TTL", InvalidMessage, "give ExpiresAt or TTL, not both")
	}
	id, fresh := m.ID, m.ID == ""
	if fresh {
		u, err := uuid.NewV7()
		if err != nil {
			return bad("ID", InvalidMessage, err.Error())
		}
		id = u.String()
	} else {
		u, err := uuid.Parse(id)
		if err != nil || len(id) != 36 {
			return bad("ID", InvalidMessage, "not a UUID in 8-4-4-4-12 form")
		}
		id = u.String()
	}
	ct := m.ContentType
	if ct == "" {
		ct = publisher.DefaultContentType
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return bad("ContentType", InvalidHeader, "not a media type")
	}
	headers := make(map[string]string, len(m.Headers)+2)
	for k, v := range m.Headers {
		lk := strings.ToLower(k)
		if !msgcheck.HeaderName(lk) {
			return bad("Headers", InvalidHeader, "bad name "+strconv.Quote(k))
		}
		if msgcheck.Reserved(lk) || lk == publisher.HeaderContentType || lk == publisher.HeaderTransferEncode {
			return bad("Headers", InvalidHeader, "reserved name "+strconv.Quote(k))
		}
		if !utf8.ValidString(v) {
			return bad("Headers", InvalidHeader, "value of "+strconv.Quote(k)+" is not UTF-8")
		}
		headers[lk] = v
	}
	for k, v := range trace {
		headers[k] = v
	}
	headers[publisher.HeaderContentType] = ct
	payload := string(m.Payload)
	switch {
	case isJSONType(ct):
		if !json.Valid(m.Payload) {
			return bad("Payload", InvalidJSON, "content type is "+ct)
		}
	case !utf8.Valid(m.Payload) || strings.ContainsRune(payload, 0):
		payload = base64.StdEncoding.EncodeToString(m.Payload)
		headers[publisher.HeaderTransferEncode] = "base64"
	}
	hb, err := json.Marshal(headers)
	if err != nil {
		return bad("Headers", InvalidHeader, err.Error())
	}
	return store.NewMessage{
		MessageID:   id,
		Topic:       m.Topic,
		Key:         m.Key,
		Payload:     payload,
		Headers:     string(hb),
		MaxAttempts: m.MaxAttempts,
		Delay:       m.Delay,
		NotBefore:   m.NotBefore,
		ExpiresAt:   m.ExpiresAt,
		ExpiresIn:   m.TTL,
		FreshID:     fresh,
	}, nil
}
