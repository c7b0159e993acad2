// Package outboxce renders outbox messages as CloudEvents 1.0 and reads
// them back: the wire format a route asks for with ?format=cloudevents
// (binary content mode) or, on webhooks, ?format=cloudevents-structured.
//
// # Attributes
//
// Every event carries:
//
//	specversion      1.0
//	id               the message id (consumers dedupe by it)
//	source           the route's ce_source, default DefaultSource ("/outbox")
//	type             the message topic
//	time             the time the message was enqueued (database time), RFC 3339
//	datacontenttype  the message's content type
//	subject          the business key, when the message has one
//	partitionkey     the business key, on Kafka only (the record key too)
//	traceparent      the producer's trace, when it had one (Distributed Tracing
//	tracestate       extension); the protocol's own traceparent header stays
//
// The payload is the event data, byte for byte. The producer's own headers
// travel as the protocol's plain headers, outside the event's attributes;
// a producer header whose name the binding reads as an attribute (ce-…
// over HTTP and NATS, ce_… over Kafka, cloudEvents:… over AMQP, any name
// over MQTT) must be a valid extension name (lower-case letters and
// digits) that is none of the above, or the message cannot be sent and
// goes dead with the reason. Over MQTT the claim-check and seal headers
// travel as the extensions outboxclaimcheck, outboxclaimsize,
// outboxclaimsha256, outboxseal, outboxsealkey and outboxsealheaders
// (OutboxExtension), which Decode reads back under their own names.
//
// # Bindings
//
// Each destination follows its CloudEvents protocol binding: HTTP (ce-
// headers, percent-encoded; Content-Type), Kafka (ce_ headers;
// content-type; the record key is the business key), AMQP (cloudEvents:
// application properties, here the AMQP 0-9-1 headers table; the
// content-type property), NATS (ce- headers, percent-encoded, with
// ce-datacontenttype) and MQTT 5 (user properties named as the attributes;
// the Content Type property). Redis Streams and stdout have no binding and
// refuse the option.
package outboxce

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/txoutbox/outbox/publisher"
)

// Values of the CloudEvents wire.
const (
	// SpecVersion is the CloudEvents version of every event.
	SpecVersion = "1.0"
	// DefaultSource is the source attribute of a route that names none.
	DefaultSource = "/outbox"
	// StructuredContentType is the content type of a structured-mode
	// event (the JSON event format).
	StructuredContentType = "application/cloudevents+json"
)

// URL parameters and configuration keys of the format.
const (
	// ParamFormat chooses the wire format: plain (the default),
	// cloudevents (binary content mode) or cloudevents-structured
	// (webhooks only).
	ParamFormat = "format"
	// ParamSource sets the source attribute (a URI-reference).
	ParamSource = "ce_source"
)

// Mode is a CloudEvents content mode.
type Mode uint8

// Content modes.
const (
	// Binary puts the attributes in the protocol's headers and the data,
	// byte for byte, in its body.
	Binary Mode = iota + 1
	// Structured puts the whole event in the body as the JSON event
	// format (application/cloudevents+json). Webhooks only.
	Structured
)

// Format names of ParamFormat.
const (
	FormatPlain      = "plain"
	FormatBinary     = "cloudevents"
	FormatStructured = "cloudevents-structured"
)

// Format is a route's CloudEvents wire format. A nil *Format is the plain
// outbox wire.
type Format struct {
	// Mode is Binary or Structured. Defaults to Binary.
	Mode Mode
	// Source is the source attribute, a URI-reference naming the
	// producer, e.g. "/orders" or "https://orders.example.com". Defaults
	// to DefaultSource.
	Source string
}

// Parse reads the format and ce_source options as a URL or the
// configuration file writes them. An empty or "plain" format is the plain
// wire (nil), which takes no ce_source.
func Parse(format, source string) (*Format, error) {
	var f Format
	switch strings.TrimSpace(format) {
	case "", FormatPlain:
		if source != "" {
			return nil, fmt.Errorf("%s needs %s=%s", ParamSource, ParamFormat, FormatBinary)
		}
		return nil, nil
	case FormatBinary:
		f.Mode = Binary
	case FormatStructured:
		f.Mode = Structured
	default:
		return nil, fmt.Errorf("%s=%q: want %s, %s or %s", ParamFormat, format, FormatPlain, FormatBinary, FormatStructured)
	}
	f.Source = source
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Validate reports what is wrong with f: an unknown mode or a source that
// is not a URI-reference. A nil f is valid.
func (f *Format) Validate() error {
	if f == nil {
		return nil
	}
	if f.Mode != 0 && f.Mode != Binary && f.Mode != Structured {
		return fmt.Errorf("unknown CloudEvents mode %d", f.Mode)
	}
	if f.Source == "" {
		return nil
	}
	if strings.ContainsFunc(f.Source, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '"' }) {
		return fmt.Errorf("%s=%q: want a URI-reference without spaces, quotes or control characters, e.g. /orders", ParamSource, f.Source)
	}
	if _, err := url.Parse(f.Source); err != nil {
		return fmt.Errorf("%s=%q: not a URI-reference", ParamSource, f.Source)
	}
	return nil
}

// String returns the format's option value: cloudevents or
// cloudevents-structured ("plain" for nil).
func (f *Format) String() string {
	switch {
	case f == nil:
		return FormatPlain
	case f.Mode == Structured:
		return FormatStructured
	}
	return FormatBinary
}

// IsStructured reports whether f is structured mode.
func (f *Format) IsStructured() bool { return f != nil && f.Mode == Structured }

func (f *Format) source() string {
	if f.Source == "" {
		return DefaultSource
	}
	return f.Source
}

// Attribute is one context attribute of an event.
type Attribute struct {
	Name, Value string
}

// Attribute names the package sets.
const (
	AttrSpecVersion     = "specversion"
	AttrID              = "id"
	AttrSource          = "source"
	AttrType            = "type"
	AttrTime            = "time"
	AttrDataContentType = "datacontenttype"
	AttrSubject         = "subject"
	AttrPartitionKey    = "partitionkey"
	AttrTraceParent     = "traceparent"
	AttrTraceState      = "tracestate"
)

// ours are the attributes the package sets; a producer header cannot set
// them.
var ours = map[string]bool{
	AttrSpecVersion: true, AttrID: true, AttrSource: true, AttrType: true, AttrTime: true,
	AttrDataContentType: true, AttrSubject: true, AttrPartitionKey: true, AttrTraceParent: true,
	AttrTraceState: true, "data": true, "data_base64": true, "dataschema": true,
}

// Attributes returns env's context attributes in a fixed order:
// specversion, id, source, type, time, datacontenttype, then subject,
// partitionkey (when partitionKey and the message has a key), traceparent
// and tracestate when present.
func (f *Format) Attributes(env *publisher.Envelope, partitionKey bool) []Attribute {
	a := []Attribute{
		{AttrSpecVersion, SpecVersion},
		{AttrID, env.ID},
		{AttrSource, f.source()},
		{AttrType, env.Topic},
	}
	if !env.CreatedAt.IsZero() {
		a = append(a, Attribute{AttrTime, env.CreatedAt.UTC().Format(time.RFC3339Nano)})
	}
	a = append(a, Attribute{AttrDataContentType, contentType(env)})
	if env.Key != "" {
		a = append(a, Attribute{AttrSubject, env.Key})
		if partitionKey {
			a = append(a, Attribute{AttrPartitionKey, env.Key})
		}
	}
	for _, n := range []string{publisher.HeaderTraceParent, publisher.HeaderTraceState} {
		if v := env.Headers[n]; v != "" {
			a = append(a, Attribute{n, v})
		}
	}
	return a
}

func contentType(env *publisher.Envelope) string {
	if ct := env.Headers[publisher.HeaderContentType]; ct != "" {
		return ct
	}
	return publisher.DefaultContentType
}

// Binding is how one protocol carries the attributes in binary mode.
type Binding struct {
	// Name names the protocol in errors.
	Name string
	// Prefix comes before each attribute's name in the protocol's
	// headers.
	Prefix string
	// ContentType is the header that carries datacontenttype; "" when the
	// protocol has a content-type property of its own, which the
	// publisher sets.
	ContentType string
	// Escape percent-encodes header values (space, '"', '%' and all but
	// printable ASCII), as the HTTP and NATS bindings require.
	Escape bool
	// PartitionKey adds the partitionkey attribute (Kafka, whose record
	// key is the business key).
	PartitionKey bool
}

// The protocol bindings.
var (
	HTTP  = Binding{Name: "http", Prefix: "ce-", ContentType: "content-type", Escape: true}
	Kafka = Binding{Name: "kafka", Prefix: "ce_", ContentType: "content-type", PartitionKey: true}
	AMQP  = Binding{Name: "amqp", Prefix: "cloudEvents:"}
	NATS  = Binding{Name: "nats", Prefix: "ce-", ContentType: "ce-datacontenttype", Escape: true}
	MQTT  = Binding{Name: "mqtt"}
)

// The claim-check headers (package claimcheck) and the seal headers
// (package seal) as extension attributes, on a binding that reads them
// as attributes (MQTT, where every user property is one): their own names
// hold '-', which no attribute name may, and the digest's would be longer
// than 20 characters without '-'. Headers turns each header into its
// extension and Decode turns it back, so that a consumer resolves the
// claim check and opens the seal as on the plain wire. Other bindings
// carry these headers as plain protocol headers under their own names.
const (
	ExtClaimCheck    = "outboxclaimcheck"  // outbox-claim-check
	ExtClaimSize     = "outboxclaimsize"   // outbox-claim-check-size
	ExtClaimSHA256   = "outboxclaimsha256" // outbox-claim-check-sha256
	ExtSeal          = "outboxseal"        // outbox-seal
	ExtSealKey       = "outboxsealkey"     // outbox-seal-key
	ExtSealedHeaders = "outboxsealheaders" // outbox-seal-headers
)

// outboxExtensions pairs each outbox header with its extension name.
var outboxExtensions = []struct{ header, ext string }{
	{"outbox-claim-check", ExtClaimCheck},
	{"outbox-claim-check-size", ExtClaimSize},
	{"outbox-claim-check-sha256", ExtClaimSHA256},
	{"outbox-seal", ExtSeal},
	{"outbox-seal-key", ExtSealKey},
	{"outbox-seal-headers", ExtSealedHeaders},
}

// OutboxExtension returns the extension attribute that carries the
// outbox header name (in lower case) where a binding would read the
// header as an attribute; ok is false for any other header.
func OutboxExtension(name string) (ext string, ok bool) {
	for _, e := range outboxExtensions {
		if e.header == name {
			return e.ext, true
		}
	}
	return "", false
}

// OutboxHeader is the reverse of OutboxExtension: the outbox header that
// the extension attribute ext carries.
func OutboxHeader(ext string) (name string, ok bool) {
	for _, e := range outboxExtensions {
		if e.ext == ext {
			return e.header, true
		}
	}
	return "", false
}

// mapsOutboxHeader reports whether b reads the outbox header name as an
// attribute, and so carries it as its extension (OutboxExtension).
func (b Binding) mapsOutboxHeader(name string) bool {
	return strings.HasPrefix(name, strings.ToLower(b.Prefix))
}

// ValidExtensionName reports whether name can be a CloudEvents attribute
// name: lower-case ASCII letters and digits, 1 to 20 of them.
func ValidExtensionName(name string) bool {
	if name == "" || len(name) > 20 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Headers returns the protocol headers of env in binary mode: the
// producer's own headers, the plain traceparent and tracestate, and every
// attribute under the binding's names (datacontenttype under
// b.ContentType, or not at all when the protocol's property carries it).
// outbox-topic and outbox-business-key are left out: type and subject
// carry them. The claim-check and seal headers become their extension
// attributes (OutboxExtension) on a binding that would read them as
// attributes. The error is permanent: a producer header that the binding
// would read as an attribute but cannot be one, or that would pass for
// one of those extensions.
func (f *Format) Headers(b Binding, env *publisher.Envelope) (map[string]string, error) {
	h := make(map[string]string, len(env.Headers)+10)
	lp := strings.ToLower(b.Prefix)
	for k, v := range env.Headers {
		switch k {
		case publisher.HeaderTopic, publisher.HeaderBusinessKey, publisher.HeaderContentType, publisher.HeaderTraceParent, publisher.HeaderTraceState:
			continue
		}
		if lk := strings.ToLower(k); strings.HasPrefix(lk, lp) {
			if ext, ok := OutboxExtension(lk); ok {
				h[b.Prefix+ext] = b.escape(v)
				continue
			}
			name := lk[len(lp):]
			if header, ok := OutboxHeader(name); ok && b.mapsOutboxHeader(header) {
				return nil, fmt.Errorf("%s: header %q cannot travel in a CloudEvents message: the %s binding carries %s as the extension %q", b.Name, k, b.Name, header, name)
			}
			if !ValidExtensionName(name) || ours[name] || lk == b.ContentType {
				return nil, fmt.Errorf("%s: header %q cannot travel in a CloudEvents message: the %s binding reads it as an attribute, and %q is not a free extension name (lower-case letters and digits)", b.Name, k, b.Name, name)
			}
			if b.Escape {
				v = Escape(v)
			}
		}
		h[k] = v
	}
	for _, n := range []string{publisher.HeaderTraceParent, publisher.HeaderTraceState} {
		if v := env.Headers[n]; v != "" {
			h[n] = v
		}
	}
	for _, a := range f.Attributes(env, b.PartitionKey) {
		if a.Name == AttrDataContentType {
			switch {
			case b.ContentType == publisher.HeaderContentType:
				h[b.ContentType] = a.Value // the protocol's own header, as it is
			case b.ContentType != "":
				h[b.ContentType] = b.escape(a.Value)
			}
			continue
		}
		h[b.Prefix+a.Name] = b.escape(a.Value)
	}
	return h, nil
}

func (b Binding) escape(v string) string {
	if b.Escape {
		return Escape(v)
	}
	return v
}

// Escape percent-encodes s as the HTTP and NATS bindings require of a
// header value: space, '"', '%' and every byte outside printable ASCII
// become %XX (upper case).
func Escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEscape(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func mustEscape(c byte) bool {
	return c <= ' ' || c == '"' || c == '%' || c >= 0x7f
}

// Unescape undoes Escape on a received header value: a double-quoted
// value is unquoted first, then one round of percent-decoding is made;
// the result must be UTF-8.
func Unescape(s string) (string, error) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		var b strings.Builder
		for i := 1; i < len(s)-1; i++ {
			if s[i] == '\\' && i+1 < len(s)-1 {
				i++
			}
			b.WriteByte(s[i])
		}
		s = b.String()
	}
	if !strings.Contains(s, "%") {
		return s, nil
	}
	v, err := url.PathUnescape(s)
	if err != nil {
		return "", fmt.Errorf("bad percent-encoding in %q", s)
	}
	if !utf8.ValidString(v) {
		return "", fmt.Errorf("percent-encoding of %q is not UTF-8", s)
	}
	return v, nil
}

// Message is a decoded event as the plain wire gives it.
type Message struct {
	// ID is the id attribute.
	ID string
	// Topic is the type attribute.
	Topic string
	// Key is the subject attribute (or, on Kafka, the record key).
	Key string
	// ContentType is datacontenttype.
	ContentType string
	// Headers are the protocol's headers, names in lower case, plus
	// outbox-topic, outbox-business-key (when a key), content-type and
	// traceparent/tracestate, as the plain wire has them.
	Headers map[string]string
	// Payload is the event data.
	Payload []byte
}

// ErrNotEvent: a message carries no CloudEvents specversion, so it is not
// a CloudEvent.
var ErrNotEvent = errors.New("not a CloudEvent (no specversion)")

// IsBinary reports whether headers (names in lower case) hold a
// binary-mode event of binding b.
func (b Binding) IsBinary(headers map[string]string) bool {
	_, ok := headers[strings.ToLower(b.Prefix)+AttrSpecVersion]
	return ok
}

// DecodeEvent reads a message of binding b that may be a CloudEvent:
// structured mode when its content type (property, the protocol's
// content type property, else the content-type header) is
// application/cloudevents+json, binary mode when b's specversion header
// is there. It returns nil, nil for a message that is neither.
func (b Binding) DecodeEvent(headers map[string]string, property string, payload []byte) (*Message, error) {
	ct := property
	if ct == "" {
		ct = headers[publisher.HeaderContentType]
	}
	switch {
	case IsStructuredType(ct):
		return DecodeStructured(headers, payload)
	case b.IsBinary(headers):
		return b.Decode(headers, property, payload)
	}
	return nil, nil
}

// Decode reads a binary-mode event of binding b: headers (names in lower
// case) as the protocol delivered them, contentType from the protocol's
// property when it has one ("" otherwise) and payload. The result is the
// message the plain wire would have given.
func (b Binding) Decode(headers map[string]string, contentType string, payload []byte) (*Message, error) {
	lp := strings.ToLower(b.Prefix)
	attr := func(name string) (string, error) {
		v := headers[lp+name]
		if b.Escape {
			return Unescape(v)
		}
		return v, nil
	}
	sv, ok := headers[lp+AttrSpecVersion]
	if !ok {
		return nil, ErrNotEvent
	}
	if sv != SpecVersion {
		return nil, fmt.Errorf("CloudEvents specversion %q is not %s", sv, SpecVersion)
	}
	m := &Message{Headers: make(map[string]string, len(headers)+4), Payload: payload}
	for k, v := range headers {
		m.Headers[k] = v
	}
	var err error
	for _, p := range []struct {
		name string
		to   *string
	}{{AttrID, &m.ID}, {AttrType, &m.Topic}, {AttrSubject, &m.Key}} {
		if *p.to, err = attr(p.name); err != nil {
			return nil, fmt.Errorf("%s%s: %v", b.Prefix, p.name, err)
		}
	}
	if m.ID == "" || m.Topic == "" {
		return nil, errors.New("CloudEvent without id or type")
	}
	switch {
	case contentType != "":
		m.ContentType = contentType
	case b.ContentType == publisher.HeaderContentType:
		m.ContentType = headers[publisher.HeaderContentType]
	case b.ContentType != "":
		if m.ContentType, err = attr(AttrDataContentType); err != nil {
			return nil, fmt.Errorf("%s%s: %v", b.Prefix, AttrDataContentType, err)
		}
	}
	for _, n := range []string{AttrTraceParent, AttrTraceState} {
		if _, plain := m.Headers[n]; !plain {
			if v, err := attr(n); err == nil && v != "" {
				m.Headers[n] = v
			}
		}
	}
	for _, e := range outboxExtensions {
		if _, ok := headers[lp+e.ext]; !ok || !b.mapsOutboxHeader(e.header) {
			continue
		}
		v, err := attr(e.ext)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %v", b.Prefix, e.ext, err)
		}
		delete(m.Headers, lp+e.ext)
		m.Headers[e.header] = v
	}
	m.fill()
	return m, nil
}

// fill sets the plain wire's headers from the decoded fields.
func (m *Message) fill() {
	m.Headers[publisher.HeaderTopic] = m.Topic
	if m.Key != "" {
		m.Headers[publisher.HeaderBusinessKey] = m.Key
	}
	if m.ContentType != "" {
		m.Headers[publisher.HeaderContentType] = m.ContentType
	}
}

// isJSON reports whether a media type is JSON.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/json")
}

// IsStructuredType reports whether a content type is the JSON event
// format (application/cloudevents+json, matched case-insensitively).
func IsStructuredType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == StructuredContentType
}

// Structured renders env as one event in the JSON event format: the
// attributes, then the payload as data (JSON payloads embedded as they
// are, byte for byte; other UTF-8 text as a JSON string) or, for bytes
// that are not UTF-8 or claim JSON without being JSON, as data_base64.
func (f *Format) Structured(env *publisher.Envelope) []byte {
	var b []byte
	b = append(b, '{')
	for i, a := range f.Attributes(env, false) {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, a.Name) // attribute names are ASCII
		b = append(b, ':')
		b = appendJSONString(b, a.Value)
	}
	ct := contentType(env)
	switch {
	case isJSON(ct) && json.Valid(env.Payload):
		b = append(b, `,"data":`...)
		b = append(b, env.Payload...)
	case utf8.Valid(env.Payload) && !isJSON(ct): // JSON-typed bytes that are not JSON go as base64, kept exactly
		b = append(b, `,"data":`...)
		b = appendJSONString(b, string(env.Payload))
	default:
		b = append(b, `,"data_base64":`...)
		b = appendJSONString(b, encodeBase64(env.Payload))
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// StructuredHeaders returns the protocol headers that go with a
// structured-mode event: the producer's own headers, the plain
// traceparent and tracestate, and content-type
// application/cloudevents+json.
func (f *Format) StructuredHeaders(env *publisher.Envelope) map[string]string {
	h := make(map[string]string, len(env.Headers))
	for k, v := range env.Headers {
		switch k {
		case publisher.HeaderTopic, publisher.HeaderBusinessKey:
			continue
		}
		h[k] = v
	}
	h[publisher.HeaderContentType] = StructuredContentType
	return h
}

// DecodeStructured reads one event in the JSON event format. headers are
// the protocol's (names in lower case), kept in the result.
func DecodeStructured(headers map[string]string, body []byte) (*Message, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("structured CloudEvent: %v", err)
	}
	str := func(name string) (string, error) {
		r, ok := raw[name]
		if !ok || string(r) == "null" {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return "", fmt.Errorf("structured CloudEvent: %s is not a string", name)
		}
		return s, nil
	}
	m := &Message{Headers: make(map[string]string, len(headers)+6)}
	for k, v := range headers {
		m.Headers[k] = v
	}
	sv, err := str(AttrSpecVersion)
	if err != nil {
		return nil, err
	}
	if sv == "" {
		return nil, ErrNotEvent
	}
	if sv != SpecVersion {
		return nil, fmt.Errorf("CloudEvents specversion %q is not %s", sv, SpecVersion)
	}
	for _, p := range []struct {
		name string
		to   *string
	}{{AttrID, &m.ID}, {AttrType, &m.Topic}, {AttrSubject, &m.Key}, {AttrDataContentType, &m.ContentType}} {
		if *p.to, err = str(p.name); err != nil {
			return nil, err
		}
	}
	if m.ID == "" || m.Topic == "" {
		return nil, errors.New("structured CloudEvent without id or type")
	}
	if m.ContentType == "" {
		m.ContentType = publisher.DefaultContentType // the JSON event format's default
	}
	for _, n := range []string{AttrTraceParent, AttrTraceState} {
		if v, err := str(n); err == nil && v != "" {
			if _, plain := m.Headers[n]; !plain {
				m.Headers[n] = v
			}
		}
	}
	if d, ok := raw["data_base64"]; ok {
		var s string
		if err := json.Unmarshal(d, &s); err != nil {
			return nil, errors.New("structured CloudEvent: data_base64 is not a string")
		}
		if m.Payload, err = decodeBase64(s); err != nil {
			return nil, fmt.Errorf("structured CloudEvent: data_base64: %v", err)
		}
	} else if d, ok := raw["data"]; ok {
		if !isJSON(m.ContentType) && len(d) > 0 && d[0] == '"' {
			var s string
			if err := json.Unmarshal(d, &s); err != nil {
				return nil, errors.New("structured CloudEvent: bad data string")
			}
			m.Payload = []byte(s)
		} else {
			m.Payload = []byte(d)
		}
	}
	m.fill()
	return m, nil
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
