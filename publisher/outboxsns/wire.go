package outboxsns

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
	// payload SNS cannot carry as text (not UTF-8, or characters outside
	// what SNS and SQS accept); absent when the body is the payload itself.
	AttrBodyEncoding = "outbox-body-encoding"
	// AttrHeaders carries, as one JSON object, the headers that do not
	// travel as attributes of their own: past the attribute limit, or
	// with a name or value an attribute cannot have.
	AttrHeaders = "outbox-headers"
	// MaxAttributes is the most message attributes SNS delivers to an SQS
	// queue on one message.
	MaxAttributes = 10
	// attrType is the data type of every attribute sent.
	attrType = "String"
)

// encodingBase64 is AttrBodyEncoding's value for a base64 body.
const encodingBase64 = "base64"

// Binding is how a CloudEvent travels over SNS in binary mode (there is
// no official CloudEvents binding for SNS): every attribute as a message
// attribute named ce-<attribute>, values as they are (attributes carry any
// text SNS accepts, so nothing is percent-encoded), datacontenttype as the
// content-type attribute.
var Binding = outboxce.Binding{Name: "sns", Prefix: "ce-", ContentType: publisher.HeaderContentType}

// headerOrder are the headers that get their own attribute first, in
// this order; the others follow by name.
var headerOrder = []string{
	publisher.HeaderTopic, publisher.HeaderBusinessKey, publisher.HeaderContentType,
	publisher.HeaderTraceParent, publisher.HeaderTraceState,
	"ce-specversion", "ce-id", "ce-type", "ce-source", "ce-subject", "ce-time",
}

// attr is one message attribute, always of type String.
type attr struct{ name, value string }

// wire is a message as SNS carries it.
type wire struct {
	body  string
	attrs []attr
}

// encode builds the wire form of env, or says why it cannot be sent.
func encode(env *publisher.Envelope, ce *outboxce.Format) (*wire, error) {
	if env.ID == "" {
		return nil, errors.New("message has no id")
	}
	headers := env.Headers
	if ce != nil {
		var err error
		if headers, err = ce.Headers(Binding, env); err != nil {
			return nil, err
		}
	}
	w := &wire{}
	w.add(AttrMessageID, env.ID)
	if validText(env.Payload) {
		w.body = string(env.Payload)
	} else {
		w.body = base64.StdEncoding.EncodeToString(env.Payload)
		w.add(AttrBodyEncoding, encodingBase64)
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
		if validAttrName(k) && headers[k] != "" && validText([]byte(headers[k])) {
			own = append(own, k)
		} else {
			rest = append(rest, k)
		}
	}
	free := MaxAttributes - len(w.attrs)
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

func (w *wire) add(name, value string) {
	w.attrs = append(w.attrs, attr{name, value})
}

// size is the wire's size as SNS counts it: the body, and each
// attribute's name, type and value.
func (w *wire) size() int {
	n := len(w.body)
	for _, a := range w.attrs {
		n += len(a.name) + len(attrType) + len(a.value)
	}
	return n
}

func rank(h string) int {
	if i := slices.Index(headerOrder, h); i >= 0 {
		return i
	}
	return len(headerOrder)
}

// validText reports whether b is UTF-8 made only of the characters SQS
// takes in a body or attribute value (SNS delivers to SQS queues): #x9, #xA, #xD, #x20 to #xD7FF,
// #xE000 to #xFFFD, #x10000 to #x10FFFF.
func validText(b []byte) bool {
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

// validAttrName reports whether s can name a message attribute: 1 to 256
// of A-Z, a-z, 0-9, '_', '-', '.'; no leading, trailing or doubled '.';
// not starting with "aws." or "amazon." in any case.
func validAttrName(s string) bool {
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
