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

	"github.com/txoutbox/outbox/internal/store"
)

// Header names the relay sets on every published message.
const (
	HeaderTopic          = "outbox-topic"
	HeaderBusinessKey    = "outbox-business-key"
	HeaderContentType    = "content-type"
	HeaderTraceParent    = "traceparent"
	HeaderTraceState     = "tracestate"
	HeaderTransferEncode = "content-transfer-encoding"
)

// DefaultContentType is the content type of a message that names none.
const DefaultContentType = "application/json"

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
}

// maxFieldLen is the longest topic and business key.
const maxFieldLen = 255

// validTopic reports whether t is dot-separated non-empty segments of
// [A-Za-z0-9_:-].
func validTopic(t string) bool {
	if t == "" || len(t) > maxFieldLen {
		return false
	}
	seg := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '.':
			if seg == 0 {
				return false
			}
			seg = 0
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == ':':
			seg++
		default:
			return false
		}
	}
	return seg > 0
}

func validHeaderName(n string) bool {
	if n == "" || len(n) > 255 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	return true
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
	if !validTopic(m.Topic) {
		detail := "want dot-separated segments of letters, digits, '_', '-', ':' (1-255 chars)"
		if m.Topic == "" {
			detail = "topic is required"
		}
		return bad("Topic", ErrInvalidTopic, detail)
	}
	if len(m.Key) > maxFieldLen {
		return bad("Key", ErrInvalidKey, "longer than 255 bytes")
	}
	if !utf8.ValidString(m.Key) || strings.ContainsRune(m.Key, 0) {
		return bad("Key", ErrInvalidKey, "not UTF-8 text")
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
		ct = DefaultContentType
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return bad("ContentType", ErrInvalidHeader, "not a media type")
	}
	headers := make(map[string]string, len(m.Headers)+2)
	for k, v := range m.Headers {
		lk := strings.ToLower(k)
		if !validHeaderName(lk) {
			return bad("Headers", ErrInvalidHeader, "bad name "+strconv.Quote(k))
		}
		if strings.HasPrefix(lk, "outbox-") || lk == HeaderContentType || lk == HeaderTransferEncode {
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
	headers[HeaderContentType] = ct
	payload := string(m.Payload)
	switch {
	case isJSONType(ct):
		if !json.Valid(m.Payload) {
			return bad("Payload", ErrInvalidJSON, "content type is "+ct)
		}
	case !utf8.Valid(m.Payload) || strings.ContainsRune(payload, 0):
		payload = base64.StdEncoding.EncodeToString(m.Payload)
		headers[HeaderTransferEncode] = "base64"
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
		FreshID:     fresh,
	}, nil
}
