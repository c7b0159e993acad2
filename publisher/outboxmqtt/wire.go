package outboxmqtt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// PropertyMessageID is the MQTT 5 user property that carries the message
// id. Consumers dedupe by it.
const PropertyMessageID = "message-id"

// Limits of the MQTT 5 wire.
const (
	// MaxTopicLen is the longest topic name, in bytes.
	MaxTopicLen = 65535
	// maxStringLen is the longest UTF-8 string (property key or value).
	maxStringLen = 65535
	// maxPacketSize is the largest packet MQTT can frame (the variable
	// byte integer's maximum, plus the fixed header).
	maxPacketSize = 268435455 + 5
)

// Topic returns the MQTT topic name a destination is published to: the
// destination with every '.' replaced by '/', so "order.created" becomes
// "order/created" and a consumer can subscribe to "order/+".
func Topic(destination string) string {
	return strings.ReplaceAll(destination, ".", "/")
}

// errLoss is the cause given to a publish whose connection dropped while
// it awaited its PUBACK.
var errLoss = errors.New("connection to the broker lost before PUBACK")

// invalidString says why s cannot be an MQTT 5 UTF-8 string that every
// broker accepts, or "" when it can: valid UTF-8, at most 65535 bytes, no
// NUL and no control characters (brokers such as Mosquitto drop the whole
// connection for those, taking every message in flight with it).
func invalidString(s string) string {
	if len(s) > maxStringLen {
		return strconv.Itoa(len(s)) + " bytes, MQTT allows 65535"
	}
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	for _, r := range s {
		switch {
		case r == 0:
			return "contains NUL"
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return "contains control character " + fmt.Sprintf("%U", r)
		case r == 0xfffe || r == 0xffff:
			return "contains non-character " + fmt.Sprintf("%U", r)
		}
	}
	return ""
}

// invalidTopic says why topic cannot be published to, or "" when it can.
func invalidTopic(topic string) string {
	switch {
	case topic == "":
		return "empty topic"
	case len(topic) > MaxTopicLen:
		return "topic is " + strconv.Itoa(len(topic)) + " bytes, MQTT allows 65535"
	case strings.ContainsAny(topic, "+#"):
		return "topic contains a wildcard ('+' or '#'), which only subscriptions may use"
	case topic[0] == '$':
		return "topic starts with '$', which is reserved for the broker"
	}
	if why := invalidString(topic); why != "" {
		return "topic " + why
	}
	return ""
}

// quoted renders a topic for an error message: quoted and cut short.
func quoted(topic string) string {
	if len(topic) > 80 {
		cut := 80
		for cut > 0 && !utf8.RuneStart(topic[cut]) {
			cut--
		}
		return strconv.Quote(topic[:cut]) + "…"
	}
	return strconv.Quote(topic)
}

// packet builds the PUBLISH for env, or a permanent error when the message
// cannot be expressed on the MQTT 5 wire. maxPacket is the server's
// Maximum Packet Size, 0 when unknown.
func packet(env *publisher.Envelope, maxPacket uint32, ce *outboxce.Format) (*paho.Publish, error) {
	if env == nil {
		return nil, publisher.Permanent(errors.New("mqtt: nil envelope"))
	}
	topic := Topic(env.Destination)
	if why := invalidTopic(topic); why != "" {
		return nil, publisher.Permanent(fmt.Errorf("mqtt: cannot publish to %s (destination %s): %s", quoted(topic), quoted(env.Destination), why))
	}
	headers := env.Headers
	if ce != nil {
		h, err := ce.Headers(outboxce.MQTT, env)
		if err != nil {
			return nil, publisher.Permanent(err)
		}
		headers = h
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		if k != PropertyMessageID {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	props := &paho.PublishProperties{User: make(paho.UserProperties, 0, len(names)+1)}
	if ce == nil { // a CloudEvent's id attribute carries it
		props.User = append(props.User, paho.UserProperty{Key: PropertyMessageID, Value: env.ID})
	}
	if why := invalidString(env.ID); why != "" {
		return nil, publisher.Permanent(fmt.Errorf("mqtt: message id %s", why))
	}
	for _, k := range names {
		v := headers[k]
		if why := invalidString(k); why != "" || k == "" {
			if k == "" {
				why = "empty"
			}
			return nil, publisher.Permanent(fmt.Errorf("mqtt: header name %s: %s", quoted(k), why))
		}
		if why := invalidString(v); why != "" {
			return nil, publisher.Permanent(fmt.Errorf("mqtt: header %s: value %s", quoted(k), why))
		}
		props.User = append(props.User, paho.UserProperty{Key: k, Value: v})
	}
	props.ContentType = env.Headers[publisher.HeaderContentType]
	pub := &paho.Publish{QoS: 1, Topic: topic, Payload: env.Payload, Properties: props}
	size := packetSize(pub)
	if size > maxPacketSize || (maxPacket > 0 && size > int(maxPacket)) {
		limit := maxPacketSize
		if maxPacket > 0 {
			limit = int(maxPacket)
		}
		return nil, publisher.Permanent(fmt.Errorf("mqtt: message too large for the broker: a %d-byte PUBLISH packet (payload %d bytes), the server's maximum packet size is %d", size, len(env.Payload), limit))
	}
	return pub, nil
}

// packetSize is the encoded size of a QoS 1 PUBLISH, fixed header
// included.
func packetSize(p *paho.Publish) int {
	props := 0
	if p.Properties.ContentType != "" {
		props += 1 + 2 + len(p.Properties.ContentType)
	}
	for _, u := range p.Properties.User {
		props += 1 + 2 + len(u.Key) + 2 + len(u.Value)
	}
	remaining := 2 + len(p.Topic) + 2 + vbiLen(props) + props + len(p.Payload)
	return 1 + vbiLen(remaining) + remaining
}

// vbiLen is the length of n as an MQTT variable byte integer.
func vbiLen(n int) int {
	l := 1
	for n >= 128 {
		n /= 128
		l++
	}
	return l
}

// PubackError is a PUBACK whose reason code reports a failure (0x80 or
// above). Publish returns it wrapped in the class its code calls for;
// errors.As finds it.
type PubackError struct {
	// Topic is the MQTT topic the message was published to.
	Topic string
	// ReasonCode is the PUBACK reason code, e.g. 0x87.
	ReasonCode byte
	// Reason is the server's reason string, if it sent one.
	Reason string
}

func (e *PubackError) Error() string {
	s := fmt.Sprintf("mqtt: broker refused PUBLISH to %s: PUBACK reason 0x%02X %s", quoted(e.Topic), e.ReasonCode, reasonName(e.ReasonCode))
	if e.Reason != "" {
		s += ": " + strings.Join(strings.Fields(e.Reason), " ")
	}
	return s
}

// Permanent reports whether retrying cannot change the answer: not
// authorized (0x87), topic name invalid (0x90), payload format invalid
// (0x99), packet too large (0x95). Quota exceeded (0x97),
// implementation-specific (0x83), unspecified (0x80) and the rest are
// worth retrying.
func (e *PubackError) Permanent() bool {
	switch e.ReasonCode {
	case 0x87, 0x90, 0x99, 0x95:
		return true
	}
	return false
}

func reasonName(code byte) string {
	switch code {
	case 0x80:
		return "unspecified error"
	case 0x83:
		return "implementation specific error"
	case 0x87:
		return "not authorized"
	case 0x90:
		return "topic name invalid"
	case 0x91:
		return "packet identifier in use"
	case 0x95:
		return "packet too large"
	case 0x97:
		return "quota exceeded"
	case 0x99:
		return "payload format invalid"
	}
	return "unknown reason"
}

// classify turns the result of one PUBLISH into a publish error: nil
// when the broker acknowledged it with a success code (0x00, or 0x10 "no
// matching subscribers", which MQTT 5 counts as success).
//
// ctx is the publish's own context: its cause tells a dropped connection
// (errLoss) from the caller giving up.
func classify(ctx context.Context, topic string, resp *paho.PublishResponse, err error) error {
	if resp != nil && resp.ReasonCode >= 0x80 {
		pe := &PubackError{Topic: topic, ReasonCode: resp.ReasonCode}
		if resp.Properties != nil {
			pe.Reason = resp.Properties.ReasonString
		}
		if pe.Permanent() {
			return publisher.Permanent(pe)
		}
		return pe
	}
	if err == nil {
		if resp == nil {
			return publisher.Unknown(fmt.Errorf("mqtt: PUBLISH to %s: no PUBACK", quoted(topic)))
		}
		return nil
	}
	switch {
	case errors.Is(err, autopaho.ConnectionDownError), errors.Is(err, session.ErrNoConnection):
		// Refused before anything was written.
		return publisher.Unavailable(fmt.Errorf("mqtt: not connected to the broker: %w", err))
	case errors.Is(err, paho.ErrInvalidArguments):
		return publisher.Permanent(fmt.Errorf("mqtt: the broker cannot take PUBLISH to %s: %w", quoted(topic), err))
	case errors.Is(context.Cause(ctx), errLoss):
		return publisher.Unknown(fmt.Errorf("mqtt: PUBLISH to %s: %w; it may have been delivered", quoted(topic), errLoss))
	case errors.Is(err, context.DeadlineExceeded):
		return publisher.Unknown(fmt.Errorf("mqtt: PUBLISH to %s: no PUBACK in time: %w", quoted(topic), err))
	}
	// Anything else (cancelled, shut down mid-flight) happened after the
	// packet may have gone out.
	return publisher.Unknown(fmt.Errorf("mqtt: PUBLISH to %s: %w; it may have been delivered", quoted(topic), err))
}
