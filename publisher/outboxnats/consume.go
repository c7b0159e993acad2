package outboxnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// ErrNoMessageID: a JetStream message without a Nats-Msg-Id header, so
// not one the relay published; it cannot be deduplicated.
var ErrNoMessageID = errors.New("outboxnats: message has no Nats-Msg-Id header")

// ConsumeOptions configures Consume. nil is valid.
type ConsumeOptions struct {
	// NakDelay is how long JetStream waits before redelivering a message
	// whose handler failed (NakWithDelay). Defaults to 0: Nak, redelivered
	// at once (subject to the consumer's BackOff).
	NakDelay time.Duration
	// Logger receives handler failures and undecodable messages. Defaults
	// to slog.Default().
	Logger *slog.Logger
}

// Decode turns a JetStream message the relay published into an
// inbox.Message: ID from Nats-Msg-Id, Topic, Key and ContentType from the
// outbox-topic, outbox-business-key and content-type headers (Topic falls
// back to the subject), every header with its name in lower case.
//
// A CloudEvent (a route with format=cloudevents: ce- headers; or an
// application/cloudevents+json body) decodes into the same message: ID
// from ce-id, Topic from ce-type, Key from ce-subject, ContentType from
// ce-datacontenttype.
func Decode(msg jetstream.Msg) (*inbox.Message, error) {
	h := msg.Headers()
	headers := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) > 0 {
			headers[strings.ToLower(k)] = vs[0]
		}
	}
	ce, err := outboxce.NATS.DecodeEvent(headers, "", msg.Data())
	if err != nil {
		return nil, fmt.Errorf("outboxnats: subject %q: not a valid CloudEvent: %w", msg.Subject(), err)
	}
	if ce != nil {
		return inbox.FromCloudEvent(ce), nil
	}
	id := h.Get(jetstream.MsgIDHeader)
	if id == "" {
		return nil, fmt.Errorf("%w (subject %q)", ErrNoMessageID, msg.Subject())
	}
	topic := headers[publisher.HeaderTopic]
	if topic == "" {
		topic = msg.Subject()
	}
	return &inbox.Message{
		ID:          id,
		Topic:       topic,
		Key:         headers[publisher.HeaderBusinessKey],
		ContentType: headers[publisher.HeaderContentType],
		Headers:     headers,
		Payload:     msg.Data(),
	}, nil
}

// Consume pulls messages from c (a durable pull consumer with explicit
// acks, the operator's resource) one at a time and runs handler on each,
// with ctx carrying the producer's trace. A nil from handler acks the
// message; an error naks it, so JetStream redelivers it (after
// NakDelay). A message Decode rejects is terminated (Term): it would fail
// the same way on every delivery. Wrap handler with inbox.Handle to apply
// each message exactly once.
//
// Consume returns nil once ctx is done, after stopping its pull
// subscription, or an error when the subscription ends for another
// reason (consumer deleted, connection closed).
func Consume(ctx context.Context, c jetstream.Consumer, handler func(ctx context.Context, m *inbox.Message) error, opts *ConsumeOptions) error {
	if c == nil || handler == nil {
		return errors.New("outboxnats: Consume: nil consumer or handler")
	}
	var o ConsumeOptions
	if opts != nil {
		o = *opts
	}
	if o.NakDelay < 0 {
		return errors.New("outboxnats: ConsumeOptions.NakDelay must not be negative")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	it, err := c.Messages()
	if err != nil {
		return fmt.Errorf("outboxnats: consume: %w", err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			o.Logger.Warn("outboxnats: consume: missed heartbeats; still pulling", "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("outboxnats: consume: %w", err)
		}
		deliver(ctx, msg, handler, &o)
	}
}

// deliver runs handler on one message and settles it.
func deliver(ctx context.Context, msg jetstream.Msg, handler func(context.Context, *inbox.Message) error, o *ConsumeOptions) {
	m, err := Decode(msg)
	if err != nil {
		o.Logger.Error("outboxnats: consume: cannot decode; terminating the message", "subject", msg.Subject(), "err", err)
		if err := msg.Term(); err != nil {
			o.Logger.Warn("outboxnats: consume: term failed", "err", err)
		}
		return
	}
	if err := handler(m.Context(ctx), m); err != nil {
		o.Logger.Warn("outboxnats: consume: handler failed; JetStream will redeliver", "message_id", m.ID, "topic", m.Topic, "err", err)
		if o.NakDelay > 0 {
			err = msg.NakWithDelay(o.NakDelay)
		} else {
			err = msg.Nak()
		}
		if err != nil {
			o.Logger.Warn("outboxnats: consume: nak failed; redelivered after AckWait", "message_id", m.ID, "err", err)
		}
		return
	}
	if err := msg.Ack(); err != nil {
		o.Logger.Warn("outboxnats: consume: ack failed; the message may be redelivered", "message_id", m.ID, "err", err)
	}
}
