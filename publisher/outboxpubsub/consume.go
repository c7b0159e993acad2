package outboxpubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"cloud.google.com/go/pubsub/v2"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
)

// ErrNoMessageID: a Pub/Sub message without a message-id attribute (and
// no CloudEvent), so not one the relay published; it cannot be
// deduplicated.
var ErrNoMessageID = errors.New("outboxpubsub: message has no message-id attribute")

// ConsumeOptions configures Consume. nil is valid.
type ConsumeOptions struct {
	// Logger receives handler failures and undecodable messages. Defaults
	// to slog.Default().
	Logger *slog.Logger
}

// Decode turns a Pub/Sub message the relay published into an
// inbox.Message: ID from the message-id attribute, Topic, Key and
// ContentType from the outbox-topic, outbox-business-key and
// content-type attributes (Key falls back to the ordering key), every
// attribute with its name in lower case as Headers, the data as Payload.
//
// A CloudEvent (a route with format=cloudevents: ce- attributes per the
// Pub/Sub binding; or an application/cloudevents+json body) decodes into
// the same message: ID from ce-id, Topic from ce-type, Key from
// ce-subject, ContentType from content-type.
func Decode(msg *pubsub.Message) (*inbox.Message, error) {
	if msg == nil {
		return nil, errors.New("outboxpubsub: nil message")
	}
	headers := make(map[string]string, len(msg.Attributes))
	for k, v := range msg.Attributes {
		lk := strings.ToLower(k)
		if _, dup := headers[lk]; dup && lk != k {
			continue // the attribute already in lower case wins
		}
		headers[lk] = v
	}
	ce, err := Binding.DecodeEvent(headers, "", msg.Data)
	if err != nil {
		return nil, fmt.Errorf("outboxpubsub: message %s: not a valid CloudEvent: %w", msg.ID, err)
	}
	if ce != nil {
		if ce.Key == "" && msg.OrderingKey != "" {
			ce.Key = msg.OrderingKey
			ce.Headers[publisher.HeaderBusinessKey] = ce.Key
		}
		return inbox.FromCloudEvent(ce), nil
	}
	id := headers[AttrMessageID]
	if id == "" {
		return nil, fmt.Errorf("%w (Pub/Sub message %s)", ErrNoMessageID, msg.ID)
	}
	key := headers[publisher.HeaderBusinessKey]
	if key == "" {
		key = msg.OrderingKey
	}
	return &inbox.Message{
		ID:          id,
		Topic:       headers[publisher.HeaderTopic],
		Key:         key,
		ContentType: headers[publisher.HeaderContentType],
		Headers:     headers,
		Payload:     msg.Data,
	}, nil
}

// Consume receives messages from sub (a subscription, the operator's
// resource) and runs handler on each, with ctx carrying the producer's
// trace. A nil from handler acks the message; an error nacks it, so
// Pub/Sub redelivers it (after the subscription's retry policy). A
// message Decode rejects is acked and logged: it would fail the same way
// on every delivery. Wrap handler with inbox.Handle to apply each message
// exactly once.
//
// The client calls handler concurrently, up to sub.ReceiveSettings'
// MaxOutstandingMessages; on a subscription with message ordering
// enabled it hands over a key's messages one at a time, in order. A
// nacked message is redelivered together with the messages of its key
// that followed it, which may already have been handled: inbox.Handle
// skips those.
//
// Consume returns nil once ctx is done and every handler returned, or an
// error when receiving stops for another reason (the subscription does
// not exist, access denied).
func Consume(ctx context.Context, sub *pubsub.Subscriber, handler func(ctx context.Context, m *inbox.Message) error, opts *ConsumeOptions) error {
	if sub == nil || handler == nil {
		return errors.New("outboxpubsub: Consume: nil subscriber or handler")
	}
	var o ConsumeOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	err := sub.Receive(ctx, func(rctx context.Context, msg *pubsub.Message) {
		m, err := Decode(msg)
		if err != nil {
			o.Logger.Error("outboxpubsub: consume: cannot decode; acknowledging the message to drop it", "subscription", sub.ID(), "pubsub_message_id", msg.ID, "err", err)
			msg.Ack()
			return
		}
		if err := handler(m.Context(rctx), m); err != nil {
			o.Logger.Warn("outboxpubsub: consume: handler failed; Pub/Sub will redeliver", "message_id", m.ID, "topic", m.Topic, "err", err)
			msg.Nack()
			return
		}
		msg.Ack()
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("outboxpubsub: consume %s: %s", sub.ID(), oneLine(err.Error()))
	}
	return nil
}
