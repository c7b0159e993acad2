package outboxamqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Defaults of ConsumeOptions.
const (
	// DefaultPrefetch is how many unacknowledged deliveries the broker
	// sends ahead (basic.qos prefetch count).
	DefaultPrefetch = 32
	// DefaultRetryDelay is how long a delivery whose handler failed is held
	// before it is nacked back to the queue, so that a failing handler
	// does not spin.
	DefaultRetryDelay = 100 * time.Millisecond
)

// ErrNoMessageID: a delivery has no message_id property, so it was not
// published by the outbox and cannot be deduplicated.
var ErrNoMessageID = errors.New("amqp: delivery has no message_id")

// ErrChannelClosed: the channel Consume read from was closed (by the
// broker, the connection or the caller) before ctx ended.
var ErrChannelClosed = errors.New("amqp: consume: channel closed")

// ConsumeOptions configures Consume. nil is valid.
type ConsumeOptions struct {
	// Prefetch bounds the deliveries the broker sends before earlier ones
	// are acknowledged. Defaults to DefaultPrefetch (32).
	Prefetch int
	// ConsumerTag names the consumer on the broker. Defaults to a random
	// "outbox-…" tag.
	ConsumerTag string
	// RetryDelay is how long a delivery whose handler failed is held
	// before being nacked for redelivery. Defaults to DefaultRetryDelay
	// (100 ms).
	RetryDelay time.Duration
	// Logger receives handler failures and rejected deliveries. Defaults
	// to slog.Default().
	Logger *slog.Logger
}

// Decode turns a delivery published by this package's Publisher into an
// inbox.Message: the id from the message_id property, the topic from the
// outbox-topic header (else the type property), the key from
// outbox-business-key, the content type from the content_type property,
// every header as a string (names in lower case) and the body. A delivery
// without message_id is ErrNoMessageID.
//
// A CloudEvent (a route with format=cloudevents: cloudEvents: headers;
// or an application/cloudevents+json body) decodes into the same message:
// the id from cloudEvents:id, the topic from cloudEvents:type, the key
// from cloudEvents:subject, the content type from content_type.
func Decode(d amqp.Delivery) (*inbox.Message, error) {
	h := make(map[string]string, len(d.Headers))
	for k, v := range d.Headers {
		switch v := v.(type) {
		case string:
			h[strings.ToLower(k)] = v
		case []byte:
			h[strings.ToLower(k)] = string(v)
		case time.Time:
			h[strings.ToLower(k)] = v.UTC().Format(time.RFC3339Nano)
		default:
			h[strings.ToLower(k)] = fmt.Sprint(v)
		}
	}
	ce, err := outboxce.AMQP.DecodeEvent(h, d.ContentType, d.Body)
	if err != nil {
		return nil, fmt.Errorf("outboxamqp: not a valid CloudEvent (exchange %q, routing key %q): %w", d.Exchange, d.RoutingKey, err)
	}
	if ce != nil {
		return inbox.FromCloudEvent(ce), nil
	}
	if d.MessageId == "" {
		return nil, fmt.Errorf("%w (exchange %q, routing key %q)", ErrNoMessageID, d.Exchange, d.RoutingKey)
	}
	m := &inbox.Message{
		ID:          d.MessageId,
		Topic:       h[publisher.HeaderTopic],
		Key:         h[publisher.HeaderBusinessKey],
		ContentType: d.ContentType,
		Headers:     h,
		Payload:     d.Body,
	}
	if m.Topic == "" {
		m.Topic = d.Type
	}
	if m.ContentType == "" {
		m.ContentType = h[publisher.HeaderContentType]
	}
	return m, nil
}

// Consume reads queue on ch with manual acknowledgements and hands every
// delivery to handler, decoded, with ctx carrying the producer's trace.
// A delivery is acked only after handler returned nil; on an error it is
// held for RetryDelay and nacked with requeue, so the broker delivers it
// again (possibly to another consumer, and after later messages: a queue
// with several consumers does not keep order). A delivery without
// message_id (not from the outbox) is logged and rejected without
// requeue, to the queue's dead-letter exchange if it has one.
//
// Delivery is at least once, so handlers dedupe by message id: use
// inbox.Handle. Consume sets the channel's prefetch (basic.qos) and
// handles one delivery at a time; run several Consume calls on separate
// channels for concurrency.
//
// Consume returns nil when ctx is done, after cancelling the consumer and
// requeueing the deliveries it had not handled, and an error wrapping
// ErrChannelClosed when the channel closes first. ch stays the caller's.
func Consume(ctx context.Context, ch *amqp.Channel, queue string, handler func(ctx context.Context, m *inbox.Message) error, opts *ConsumeOptions) error {
	if ch == nil || handler == nil {
		return errors.New("amqp: Consume: nil channel or handler")
	}
	var o ConsumeOptions
	if opts != nil {
		o = *opts
	}
	if o.Prefetch <= 0 {
		o.Prefetch = DefaultPrefetch
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ConsumerTag == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		o.ConsumerTag = "outbox-" + hex.EncodeToString(b)
	}
	if err := ch.Qos(o.Prefetch, 0, false); err != nil {
		return fmt.Errorf("amqp: Consume: qos: %w", err)
	}
	deliveries, err := ch.Consume(queue, o.ConsumerTag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("amqp: Consume %s: %w", queue, err)
	}
	for {
		select {
		case <-ctx.Done():
			_ = ch.Cancel(o.ConsumerTag, false)
			for d := range deliveries { // closed once the cancel is done
				_ = d.Nack(false, true)
			}
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return fmt.Errorf("%w (queue %s)", ErrChannelClosed, queue)
			}
			if err := o.settle(ctx, d, handler); err != nil {
				o.Logger.Warn("amqp: acknowledgement failed; the broker will redeliver", "queue", queue, "message_id", d.MessageId, "err", err)
			}
		}
	}
}

// settle runs handler for d and acks, nacks or rejects it.
func (o *ConsumeOptions) settle(ctx context.Context, d amqp.Delivery, handler func(context.Context, *inbox.Message) error) error {
	m, err := Decode(d)
	if err != nil {
		o.Logger.Warn("amqp: rejecting a delivery that is not an outbox message", "err", err)
		return d.Reject(false)
	}
	if err := handler(m.Context(ctx), m); err != nil {
		o.Logger.Warn("amqp: handler failed; requeueing the message", "message_id", m.ID, "topic", m.Topic, "err", err)
		t := time.NewTimer(o.RetryDelay)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		return d.Nack(false, true)
	}
	return d.Ack(false)
}
