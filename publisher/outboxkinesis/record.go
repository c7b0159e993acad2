package outboxkinesis

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Limits of the Kinesis service.
const (
	// MaxPartitionKeyLen is the longest partition key Kinesis takes, in
	// Unicode characters (counted as UTF-16 code units, as the service
	// does).
	MaxPartitionKeyLen = 256
	// HashedKeyPrefix starts the partition key of a business key longer
	// than MaxPartitionKeyLen: "sha256:" and the lower-case hex SHA-256
	// of the key's UTF-8 bytes.
	HashedKeyPrefix = "sha256:"
)

// Field names of the record's JSON framing (the plain wire).
const (
	FieldMessageID     = "message_id"
	FieldTopic         = "topic"
	FieldBusinessKey   = "business_key"
	FieldHeaders       = "headers"
	FieldPayload       = "payload"
	FieldPayloadBase64 = "payload_base64"
)

// ErrNoMessageID: a record that is neither the outbox's JSON framing nor
// a CloudEvent with an id, so not one the relay published; it cannot be
// deduplicated.
var ErrNoMessageID = errors.New("outboxkinesis: record has no message id")

// PartitionKey returns the partition key of a message: its business key,
// or its id when it has none. A key longer than MaxPartitionKeyLen
// characters becomes HashedKeyPrefix followed by the hex SHA-256 of its
// bytes (71 characters): the same key always gets the same partition key,
// so its messages stay on one shard, in order. The record's framing
// carries the business key unchanged.
func PartitionKey(key, id string) string {
	if key == "" {
		key = id
	}
	if utf16Len(key) <= MaxPartitionKeyLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return HashedKeyPrefix + hex.EncodeToString(sum[:])
}

// utf16Len is the length of s in UTF-16 code units: how Kinesis counts a
// partition key's characters.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// Data returns the record data of env: the JSON framing of the plain
// wire, or with ce the CloudEvents JSON event format (see the package
// documentation).
func Data(env *publisher.Envelope, ce *outboxce.Format) ([]byte, error) {
	if ce != nil {
		return cloudEvent(env, ce)
	}
	return frame(env), nil
}

// frame renders the plain wire:
//
//	{"message_id":…,"topic":…,"business_key":…,"headers":{…},"payload":<JSON>}
//
// with "payload_base64":"…" instead of "payload" when the payload is not
// JSON that can be embedded as it is, byte for byte.
func frame(env *publisher.Envelope) []byte {
	b := make([]byte, 0, len(env.Payload)+256+64*len(env.Headers))
	b = append(b, `{"`+FieldMessageID+`":`...)
	b = appendString(b, env.ID)
	b = append(b, `,"`+FieldTopic+`":`...)
	b = appendString(b, env.Topic)
	if env.Key != "" {
		b = append(b, `,"`+FieldBusinessKey+`":`...)
		b = appendString(b, env.Key)
	}
	b = append(b, `,"`+FieldHeaders+`":{`...)
	for i, k := range sortedKeys(env.Headers) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, env.Headers[k])
	}
	b = append(b, '}')
	if embeddable(env.Headers[publisher.HeaderContentType], env.Payload) {
		b = append(b, `,"`+FieldPayload+`":`...)
		b = append(b, env.Payload...)
	} else {
		b = append(b, `,"`+FieldPayloadBase64+`":"`...)
		b = base64.StdEncoding.AppendEncode(b, env.Payload)
		b = append(b, '"')
	}
	return append(b, '}')
}

// embeddable reports whether a payload goes into the framing as a JSON
// value: its content type is JSON (or none, the default being JSON) and
// it is one valid UTF-8 JSON value without surrounding blanks, so that a
// consumer reading the value's bytes gets the payload byte for byte.
func embeddable(contentType string, payload []byte) bool {
	if contentType != "" && !isJSON(contentType) {
		return false
	}
	if len(payload) == 0 || len(bytes.TrimSpace(payload)) != len(payload) {
		return false
	}
	return utf8.Valid(payload) && json.Valid(payload)
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json"))
}

// cloudEvent renders env as one CloudEvent in the JSON event format.
// The producer's own headers ride along as extension attributes: one
// whose name is a free extension name (lower-case letters and digits, at
// most 20) under that name, the others together in AttrHeaders, a string
// holding a JSON object of name → value.
func cloudEvent(env *publisher.Envelope, ce *outboxce.Format) ([]byte, error) {
	ev := ce.Structured(env)
	var ext []byte
	var other []string
	for _, k := range sortedKeys(env.Headers) {
		switch k {
		case publisher.HeaderTopic, publisher.HeaderBusinessKey, publisher.HeaderContentType, publisher.HeaderTraceParent, publisher.HeaderTraceState:
			continue
		}
		if !outboxce.ValidExtensionName(k) || reservedAttr[k] {
			other = append(other, k)
			continue
		}
		ext = appendString(ext, k)
		ext = append(ext, ':')
		ext = appendString(ext, env.Headers[k])
		ext = append(ext, ',')
	}
	if len(other) > 0 {
		obj := []byte{'{'}
		for i, k := range other {
			if i > 0 {
				obj = append(obj, ',')
			}
			obj = appendString(obj, k)
			obj = append(obj, ':')
			obj = appendString(obj, env.Headers[k])
		}
		obj = append(obj, '}')
		ext = append(ext, `"`+AttrHeaders+`":`...)
		ext = appendString(ext, string(obj))
		ext = append(ext, ',')
	}
	if len(ext) == 0 {
		return ev, nil
	}
	out := make([]byte, 0, len(ev)+len(ext))
	out = append(out, '{')
	out = append(out, ext...)
	return append(out, ev[1:]...), nil
}

// AttrHeaders is the extension attribute of a CloudEvents record that
// carries the producer's headers whose names cannot be attribute names:
// a JSON object of name → value, as a string.
const AttrHeaders = "outboxheaders"

// reservedAttr are attribute names a producer header cannot take in the
// CloudEvents form.
var reservedAttr = map[string]bool{
	outboxce.AttrSpecVersion: true, outboxce.AttrID: true, outboxce.AttrSource: true, outboxce.AttrType: true,
	outboxce.AttrTime: true, outboxce.AttrDataContentType: true, outboxce.AttrSubject: true,
	outboxce.AttrPartitionKey: true, outboxce.AttrTraceParent: true, outboxce.AttrTraceState: true,
	"data": true, "data_base64": true, "dataschema": true, AttrHeaders: true,
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// plainRecord is the JSON framing as read back.
type plainRecord struct {
	MessageID     string            `json:"message_id"`
	Topic         string            `json:"topic"`
	BusinessKey   string            `json:"business_key"`
	Headers       map[string]string `json:"headers"`
	Payload       json.RawMessage   `json:"payload"`
	PayloadBase64 *string           `json:"payload_base64"`
}

// Decode turns a Kinesis record the relay published into an
// inbox.Message, from either form of the record data:
//
//   - the JSON framing: ID from message_id, Topic from topic, Key from
//     business_key, Headers from headers (names in lower case),
//     ContentType from the content-type header, Payload from payload (the
//     JSON value's bytes as they are) or payload_base64;
//   - a CloudEvent in the JSON event format (format=cloudevents): ID from
//     id, Topic from type, Key from subject, ContentType from
//     datacontenttype, Payload from data or data_base64; extension
//     attributes and the headers in AttrHeaders become headers.
//
// A record that is neither, or has no message id, is an error wrapping
// ErrNoMessageID.
func Decode(r types.Record) (*inbox.Message, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(r.Data, &probe); err != nil {
		return nil, fmt.Errorf("%w: the data is not a JSON object (%s)", ErrNoMessageID, recordName(r))
	}
	if _, ok := probe[outboxce.AttrSpecVersion]; ok {
		return decodeEvent(r, probe)
	}
	var p plainRecord
	if err := json.Unmarshal(r.Data, &p); err != nil {
		return nil, fmt.Errorf("outboxkinesis: %s: bad framing: %v", recordName(r), err)
	}
	if p.MessageID == "" {
		return nil, fmt.Errorf("%w (%s)", ErrNoMessageID, recordName(r))
	}
	m := &inbox.Message{ID: p.MessageID, Topic: p.Topic, Key: p.BusinessKey, Headers: make(map[string]string, len(p.Headers)+3)}
	for k, v := range p.Headers {
		m.Headers[strings.ToLower(k)] = v
	}
	if m.Topic == "" {
		m.Topic = m.Headers[publisher.HeaderTopic]
	}
	if m.Key == "" {
		m.Key = m.Headers[publisher.HeaderBusinessKey]
	}
	m.ContentType = m.Headers[publisher.HeaderContentType]
	switch {
	case p.PayloadBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*p.PayloadBase64)
		if err != nil {
			return nil, fmt.Errorf("outboxkinesis: %s: message %s: payload_base64: %v", recordName(r), m.ID, err)
		}
		m.Payload = b
	case p.Payload != nil:
		m.Payload = []byte(p.Payload)
	}
	return m, nil
}

// decodeEvent reads a CloudEvent in the JSON event format; its extension
// attributes (string values) and the headers in AttrHeaders become
// headers.
func decodeEvent(r types.Record, raw map[string]json.RawMessage) (*inbox.Message, error) {
	ev, err := outboxce.DecodeStructured(nil, r.Data)
	if err != nil {
		return nil, fmt.Errorf("outboxkinesis: %s: %w", recordName(r), err)
	}
	for k, v := range raw {
		if reservedAttr[k] || !outboxce.ValidExtensionName(k) {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			ev.Headers[k] = s
		}
	}
	if v, ok := raw[AttrHeaders]; ok {
		var s string
		var h map[string]string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("outboxkinesis: %s: %s is not a string", recordName(r), AttrHeaders)
		}
		if err := json.Unmarshal([]byte(s), &h); err != nil {
			return nil, fmt.Errorf("outboxkinesis: %s: %s is not a JSON object of strings: %v", recordName(r), AttrHeaders, err)
		}
		for k, v := range h {
			ev.Headers[strings.ToLower(k)] = v
		}
	}
	return inbox.FromCloudEvent(ev), nil
}

func recordName(r types.Record) string {
	seq := "?"
	if r.SequenceNumber != nil {
		seq = *r.SequenceNumber
	}
	return "record " + seq
}
