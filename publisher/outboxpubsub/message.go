package outboxpubsub

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/proto"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// AttrMessageID is the attribute that carries the message id.
const AttrMessageID = "message-id"

// Pub/Sub's limits on a message.
const (
	// MaxAttributes is how many attributes a message may carry.
	MaxAttributes = 100
	// MaxAttributeKeyBytes is the longest attribute key.
	MaxAttributeKeyBytes = 256
	// MaxAttributeValueBytes is the longest attribute value.
	MaxAttributeValueBytes = 1024
	// MaxOrderingKeyBytes is the longest ordering key.
	MaxOrderingKeyBytes = 1024
	// MaxRequestBytes is the largest publish request: one message's
	// data, attributes and ordering key, with the topic name, must fit.
	MaxRequestBytes = pubsub.MaxPublishRequestBytes
)

// Binding is the CloudEvents Google Cloud Pub/Sub protocol binding in
// binary content mode: each attribute as a message attribute named ce-
// and the attribute's name, values as they are (Pub/Sub attributes are
// UTF-8 strings), datacontenttype as the content-type attribute.
var Binding = outboxce.Binding{Name: "pubsub", Prefix: "ce-", ContentType: publisher.HeaderContentType}

// message builds the Pub/Sub message of env for topic name, or says why
// it cannot be sent (a permanent error).
func (p *Publisher) message(env *publisher.Envelope, name string) (*pubsub.Message, error) {
	fail := func(format string, args ...any) (*pubsub.Message, error) {
		return nil, fmt.Errorf("outboxpubsub: topic %s: message %s: "+format, append([]any{name, env.ID}, args...)...)
	}
	if env.ID == "" {
		return fail("no message id")
	}
	headers := env.Headers
	if p.ce != nil {
		var err error
		if headers, err = p.ce.Headers(Binding, env); err != nil {
			return fail("%v", err)
		}
	}
	attrs := make(map[string]string, len(headers)+1)
	for k, v := range headers {
		if k == AttrMessageID {
			continue // the message's own id wins
		}
		if err := validAttribute(k, v); err != nil {
			return fail("%v", err)
		}
		attrs[k] = v
	}
	attrs[AttrMessageID] = env.ID
	if len(attrs) > MaxAttributes {
		return fail("%d headers with message-id, Pub/Sub carries at most %d attributes", len(attrs), MaxAttributes)
	}
	msg := &pubsub.Message{Data: env.Payload, Attributes: attrs}
	if p.ordering && env.Key != "" {
		if len(env.Key) > MaxOrderingKeyBytes {
			return fail("business key of %d bytes, longer than the %d bytes of a Pub/Sub ordering key", len(env.Key), MaxOrderingKeyBytes)
		}
		if !utf8.ValidString(env.Key) {
			return fail("business key is not UTF-8, which a Pub/Sub ordering key must be")
		}
		msg.OrderingKey = env.Key
	}
	size := proto.Size(&pb.PubsubMessage{Data: msg.Data, Attributes: msg.Attributes, OrderingKey: msg.OrderingKey})
	// A request holds the topic name and one repeated field per message;
	// 16 bytes cover their tags and lengths.
	if limit := MaxRequestBytes - len(name) - 16; size > limit {
		return fail("too large for Pub/Sub: %d bytes of data, attributes and ordering key, the limit is %d", size, limit)
	}
	return msg, nil
}

// validAttribute says why a header cannot be a Pub/Sub attribute.
func validAttribute(k, v string) error {
	switch {
	case k == "":
		return fmt.Errorf("header with an empty name cannot be a Pub/Sub attribute")
	case len(k) > MaxAttributeKeyBytes:
		return fmt.Errorf("header name %.40q… is %d bytes, a Pub/Sub attribute key at most %d", k, len(k), MaxAttributeKeyBytes)
	case strings.HasPrefix(strings.ToLower(k), "goog"):
		return fmt.Errorf("header %q cannot be a Pub/Sub attribute: keys starting with goog are reserved", k)
	case len(v) > MaxAttributeValueBytes:
		return fmt.Errorf("header %q has a value of %d bytes, a Pub/Sub attribute value at most %d", k, len(v), MaxAttributeValueBytes)
	case !utf8.ValidString(k) || !utf8.ValidString(v):
		return fmt.Errorf("header %q is not UTF-8, which Pub/Sub attributes must be", k)
	}
	return nil
}
