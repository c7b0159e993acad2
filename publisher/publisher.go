package publisher

import (
	"context"
	"time"
)

// Envelope is a message on its way to a destination.
type Envelope struct {
	// ID is the message id (UUID). Consumers dedupe by it.
	ID string
	// Topic the message was enqueued with.
	Topic string
	// Key is the business key, "" when none.
	Key string
	// Destination is where the route sends it: the topic unless the route
	// names another.
	Destination string
	// Payload is the body, decoded when it was stored base64.
	Payload []byte
	// Headers are the wire headers: the producer's own plus outbox-topic,
	// outbox-business-key (when set), content-type and traceparent (when the
	// producer had a trace).
	Headers map[string]string
	// Attempt is this attempt's number, starting at 1.
	Attempt int
	// CreatedAt is the database time the message was enqueued.
	CreatedAt time.Time
}

// Publisher delivers envelopes to one kind of destination.
//
// Publish sends a batch and returns one result per envelope, in order: nil
// when the destination confirmed the message durably, an error otherwise.
// It must not return nil for a message whose delivery it cannot confirm.
// Envelopes in one batch never share a business key, so they may be sent
// concurrently — unless the Publisher is a RunPublisher that says it
// publishes runs. Classify errors with Permanent, RetryAfter, Unavailable and
// Unknown; other errors are retried with backoff.
//
// Publish must return when ctx is done; results not confirmed by then are
// errors.
type Publisher interface {
	Publish(ctx context.Context, batch []*Envelope) []error
	Close() error
}

// RunPublisher is a Publisher that can be given a run of one key's
// messages in one call, where the plain contract gives it one message per
// key. Its destination must keep the order of a key's messages within a
// call, and must never deliver a key's message after an earlier message of
// the same key in the call failed, unless that failure was Permanent (the
// message goes dead, which unblocks its key): any other failure fails the
// rest of the key's run in that call. The relay then sends a key's
// consecutive messages for the route in one call instead of one per round
// trip; it retries the failed message first and the rest after it, without
// charging them an attempt.
//
// PublishesRuns reports whether the Publisher keeps that promise as it is
// configured; false (or a Publisher that is no RunPublisher) gets one
// message per key per call.
type RunPublisher interface {
	Publisher
	PublishesRuns() bool
}

// Checker is the compensation step: before a message whose previous attempt
// ended with an unknown outcome (a timeout, a relay crash) is sent again,
// the relay asks whether the destination already has it. true marks the
// message sent without sending it again; false sends it again. An error
// means the destination could not say: the relay asks again a little later
// (1 s doubling to a minute) without sending the message and without
// charging an attempt.
//
// A Publisher may implement Checker itself, or a route may name one.
type Checker interface {
	Delivered(ctx context.Context, env *Envelope) (bool, error)
}

// Func delivers one envelope at a time by calling a function: the
// in-process publisher for applications that embed the relay. The batch's
// envelopes are handed to the function concurrently.
type Func func(ctx context.Context, env *Envelope) error

// Publish calls f for every envelope of the batch concurrently.
func (f Func) Publish(ctx context.Context, batch []*Envelope) []error {
	errs := make([]error, len(batch))
	if len(batch) == 1 {
		errs[0] = f(ctx, batch[0])
		return errs
	}
	done := make(chan struct{}, len(batch))
	for i, env := range batch {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = f(ctx, env)
		}()
	}
	for range batch {
		<-done
	}
	return errs
}

// Close does nothing.
func (Func) Close() error { return nil }
