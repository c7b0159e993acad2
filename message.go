package outbox

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/internal/msgcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
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

// isJSONType reports whether a content type denotes JSON.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// prepare validates m and renders it as a row. i is its index in the call;
// trace holds the caller's trace context headers, which win over the
// message's own.
func (m *Message) prepare(i int, maxPayload int, trace map[string]string) (store.NewMessage, error) {
	bad := func(field string, err error, detail string) (store.NewMessage, error) {
		return store.NewMessage{}, &ValidationError{Index: i, Field: field, Err: err, Detail: detail}
	}
	if !msgcheck.Topic(m.Topic) {
		detail := msgcheck.TopicRule
		if m.Topic == "" {
			detail = "topic is required"
		}
		return bad("Topic", ErrInvalidTopic, detail)
	}
	if detail := msgcheck.KeyError(m.Key); detail != "" {
		return bad("Key", ErrInvalidKey, detail)
	}
	if len(m.Payload) > maxPayload {
		return bad("Payload", ErrPayloadTooLarge, strconv.Itoa(len(m.Payload))+" bytes, limit "+strconv.Itoa(maxPayload))
	}
	if m.Delay < 0 {
		return bad("Delay", ErrInvalidMessage, "negative delay")
	}
	if m.MaxAttempts < 0 {
		return bad("MaxAttempts", ErrInvalidMessage, "negative")
	}
	if m.TTL < 0 {
		return bad("TTL", ErrInvalidMessage, "negative")
	}
	if m.TTL > 0 && !m.ExpiresAt.IsZero() {
		return bad("TTL", ErrInvalidMessage, "give ExpiresAt or TTL, not both")
	}
	id, fresh := m.ID, m.ID == ""
	if fresh {
		u, err := uuid.NewV7()
		if err != nil {
			return bad("ID", ErrInvalidMessage, err.Error())
		}
		id = u.String()
	} else {
		u, err := uuid.Parse(id)
		if err != nil || len(id) != 36 {
			return bad("ID", ErrInvalidMessage, "not a UUID in 8-4-4-4-12 form")
		}
		id = u.String()
	}
	ct := m.ContentType
	if ct == "" {
		ct = publisher.DefaultContentType
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return bad("ContentType", ErrInvalidHeader, "not a media type")
	}
	headers := make(map[string]string, len(m.Headers)+2)
	for k, v := range m.Headers {
		lk := strings.ToLower(k)
		if !msgcheck.HeaderName(lk) {
			return bad("Headers", ErrInvalidHeader, "bad name "+strconv.Quote(k))
		}
		if msgcheck.Reserved(lk) || lk == publisher.HeaderContentType || lk == publisher.HeaderTransferEncode {
			return bad("Headers", ErrInvalidHeader, "reserved name "+strconv.Quote(k))
		}
		if !utf8.ValidString(v) {
			return bad("Headers", ErrInvalidHeader, "value of "+strconv.Quote(k)+" is not UTF-8")
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
			return bad("Payload", ErrInvalidJSON, "content type is "+ct)
		}
	case !utf8.Valid(m.Payload) || strings.ContainsRune(payload, 0):
		payload = base64.StdEncoding.EncodeToString(m.Payload)
		headers[publisher.HeaderTransferEncode] = "base64"
	}
	hb, err := json.Marshal(headers)
	if err != nil {
		return bad("Headers", ErrInvalidHeader, err.Error())
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
