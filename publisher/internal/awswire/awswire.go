// Package awswire is what the Amazon SQS and SNS publishers share. First
// the message form (SNS delivers to SQS queues, so both carry the same):
// the payload as the body, or its base64 form with an attribute saying
// so, and the message id and the outbox headers as String message
// attributes within the services' limit of ten, the rest in one JSON
// attribute. Then the rest of publishing (Batcher): batch calls within
// the limits, each entry's result read from the answers, errors
// classified for the route; and the checks of their destination URLs. It
// imports no AWS library: each publisher makes the calls with its SDK and
// reads the SDK's errors into a Fault.
package awswire

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Attribute names of the wire besides the outbox headers.
const (
	// AttrMessageID carries the message id, on every message.
	AttrMessageID = "message-id"
	// AttrBodyEncoding is "base64" when the body is the base64 form of a
	// payload SQS and SNS cannot carry as text (not UTF-8, or characters
	// outside what they accept); absent when the body is the payload.
	AttrBodyEncoding = "outbox-body-encoding"
	// AttrHeaders carries, as one JSON object, the headers that do not
	// travel as attributes of their own: past the attribute limit, or
	// with a name or value an attribute cannot have.
	AttrHeaders = "outbox-headers"
	// MaxAttributes is the most message attributes SQS takes on one
	// message, and SNS delivers to an SQS queue.
	MaxAttributes = 10
	// AttrType is the data type of every attribute sent.
	AttrType = "String"
	// EncodingBase64 is AttrBodyEncoding's value for a base64 body.
	EncodingBase64 = "base64"
)

// CEBinding is how a CloudEvent travels over SQS or SNS in binary mode
// (there is no official CloudEvents binding for either), named name: every
// attribute as a message attribute named ce-<attribute>, values as they
// are (attributes carry any text the services accept, so nothing is
// percent-encoded), datacontenttype as the content-type attribute.
func CEBinding(name string) outboxce.Binding {
	return outboxce.Binding{Name: name, Prefix: "ce-", ContentType: publisher.HeaderContentType}
}

// headerOrder are the headers that get their own attribute first, in
// this order; the others follow by name.
var headerOrder = []string{
	publisher.HeaderTopic, publisher.HeaderBusinessKey, publisher.HeaderContentType,
	publisher.HeaderTraceParent, publisher.HeaderTraceState,
	"ce-specversion", "ce-id", "ce-type", "ce-source", "ce-subject", "ce-time",
}

// Attr is one message attribute, always of type String.
type Attr struct{ Name, Value string }

// Wire is a message as SQS and SNS carry it.
type Wire struct {
	Body  string
	Attrs []Attr
}

// Encode builds the wire form of env, or says why it cannot be sent; ce,
// when not nil, maps it to a CloudEvent over binding.
func Encode(env *publisher.Envelope, ce *outboxce.Format, binding outboxce.Binding) (*Wire, error) {
	if env.ID == "" {
		return nil, errors.New("message has no id")
	}
	headers := env.Headers
	if ce != nil {
		var err error
		if headers, err = ce.Headers(binding, env); err != nil {
			return nil, err
		}
	}
	w := &Wire{}
	w.add(AttrMessageID, env.ID)
	if ValidText(env.Payload) {
		w.Body = string(env.Payload)
	} else {
		w.Body = base64.StdEncoding.EncodeToString(env.Payload)
		w.add(AttrBodyEncoding, EncodingBase64)
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		switch k {
		case AttrMessageID, AttrBodyEncoding, AttrHeaders:
			return nil, fmt.Errorf("header %q is reserved: the wire sets it", k)
		}
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		ia, ib := rank(a), rank(b)
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(a, b)
	})
	var own, rest []string
	for _, k := range names {
		if ValidAttrName(k) && headers[k] != "" && ValidText([]byte(headers[k])) {
			own = append(own, k)
		} else {
			rest = append(rest, k)
		}
	}
	free := MaxAttributes - len(w.Attrs)
	if len(rest) > 0 || len(own) > free {
		free-- // the last slot carries the rest
		if len(own) > free {
			rest = append(rest, own[free:]...)
			own = own[:free]
		}
	}
	for _, k := range own {
		w.add(k, headers[k])
	}
	if len(rest) > 0 {
		m := make(map[string]string, len(rest))
		for _, k := range rest {
			m[k] = headers[k]
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("headers: %v", err)
		}
		w.add(AttrHeaders, string(b))
	}
	return w, nil
}

func (w *Wire) add(name, value string) {
	w.Attrs = append(w.Attrs, Attr{name, value})
}

// Size is the wire's size as SQS and SNS count it: the body, and each
// attribute's name, type and value.
func (w *Wire) Size() int {
	n := len(w.Body)
	for _, a := range w.Attrs {
		n += len(a.Name) + len(AttrType) + len(a.Value)
	}
	return n
}

func rank(h string) int {
	if i := slices.Index(headerOrder, h); i >= 0 {
		return i
	}
	return len(headerOrder)
}

// ValidText reports whether b is UTF-8 made only of the characters SQS
// (and SNS, which delivers to SQS) takes in a body or attribute value: #x9, #xA, #xD, #x20 to #xD7FF,
// #xE000 to #xFFFD, #x10000 to #x10FFFF.
func ValidText(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
		b = b[n:]
	}
	return true
}

// ValidAttrName reports whether s can name a message attribute: 1 to 256
// of A-Z, a-z, 0-9, '_', '-', '.'; no leading, trailing or doubled '.';
// not starting with "aws." or "amazon." in any case.
func ValidAttrName(s string) bool {
	if s == "" || len(s) > 256 || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	if l := strings.ToLower(s); strings.HasPrefix(l, "aws.") || strings.HasPrefix(l, "amazon.") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// Decode reads what Encode made back: attrs are the message's String
// attributes by name. It returns the headers (names in lower case, the
// outbox-headers object merged, message-id included, the wire's own
// attributes left out) and the payload.
func Decode(attrs map[string]string, body string) (map[string]string, []byte, error) {
	headers := make(map[string]string, len(attrs)+4)
	for k, v := range attrs {
		switch k {
		case AttrBodyEncoding, AttrHeaders:
			continue
		}
		headers[strings.ToLower(k)] = v
	}
	if js, ok := attrs[AttrHeaders]; ok {
		var rest map[string]string
		if err := json.Unmarshal([]byte(js), &rest); err != nil {
			return nil, nil, fmt.Errorf("attribute %s is not a JSON object of strings: %v", AttrHeaders, err)
		}
		for k, v := range rest {
			headers[strings.ToLower(k)] = v
		}
	}
	payload := []byte(body)
	switch enc := attrs[AttrBodyEncoding]; enc {
	case "":
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil, nil, fmt.Errorf("body is not base64 as %s says: %v", AttrBodyEncoding, err)
		}
		payload = b
	default:
		return nil, nil, fmt.Errorf("unknown %s %q", AttrBodyEncoding, enc)
	}
	return headers, payload, nil
}

// Split cuts items into calls of at most maxEntries items and maxBytes
// bytes (by size; an item alone larger than maxBytes is a call of its
// own), keeping their order.
func Split[T any](items []T, size func(T) int, maxEntries, maxBytes int) [][]T {
	var calls [][]T
	var cur []T
	total := 0
	for _, it := range items {
		n := size(it)
		if len(cur) == maxEntries || (len(cur) > 0 && total+n > maxBytes) {
			calls = append(calls, cur)
			cur, total = nil, 0
		}
		cur = append(cur, it)
		total += n
	}
	if len(cur) > 0 {
		calls = append(calls, cur)
	}
	return calls
}
