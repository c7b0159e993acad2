package inbox

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/seal"
)

// Message is a delivered outbox message as a consumer sees it, decoded
// from whichever broker or webhook carried it.
type Message struct {
	// ID is the message id: the dedupe key.
	ID string
	// Topic the producer enqueued it with.
	Topic string
	// Key is the business key, "" when none.
	Key string
	// ContentType of Payload.
	ContentType string
	// Headers are all headers that travelled with the message, names in
	// lower case.
	Headers map[string]string
	// Payload is the body, byte for byte as enqueued.
	Payload []byte
}

// Context returns ctx carrying the producer's trace context (traceparent,
// tracestate), so spans the handler starts join the producer's trace.
func (m *Message) Context(ctx context.Context) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(m.Headers))
}

// FromCloudEvent returns the message a decoded CloudEvent carries (see
// package outboxce): the same id, topic, key, content type, headers and
// payload the plain wire gives for it.
func FromCloudEvent(m *outboxce.Message) *Message {
	return &Message{ID: m.ID, Topic: m.Topic, Key: m.Key, ContentType: m.ContentType, Headers: m.Headers, Payload: m.Payload}
}

// DecodeHTTP decodes a webhook delivery of the relay: the plain wire
// (webhook-id, outbox-topic, …) or a CloudEvent in binary (ce- headers)
// or structured mode (an application/cloudevents+json body). It checks
// no signature (see webhooksig).
func DecodeHTTP(h http.Header, body []byte) (*Message, error) {
	headers := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) > 0 {
			headers[strings.ToLower(k)] = vs[0]
		}
	}
	if m, err := outboxce.HTTP.DecodeEvent(headers, "", body); m != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return FromCloudEvent(m), nil
	}
	return &Message{
		ID:          headers["webhook-id"],
		Topic:       headers[publisher.HeaderTopic],
		Key:         headers[publisher.HeaderBusinessKey],
		ContentType: headers[publisher.HeaderContentType],
		Headers:     headers,
		Payload:     body,
	}, nil
}

// Resolve fetches the message's payload from blobs when it arrived as a
// claim-check reference (a route with Route.ClaimCheck "reference", see
// package claimcheck): Payload becomes the blob, checked against the
// size and SHA-256 the reference names, and the claim-check headers are
// removed. A message without a reference is left as it is. A blob that
// was sealed at enqueue is still sealed: call Open next. The error wraps
// claimcheck.ErrNotFound when the blob is gone (removed by retention
// with its row, say), claimcheck.ErrMismatch when it is not the one
// referenced, claimcheck.ErrWrongStore when blobs is another kind of
// store, or is the store's own error.
func (m *Message) Resolve(ctx context.Context, blobs claimcheck.Store) error {
	ref, ok, err := claimcheck.ParseHeaders(m.Headers)
	if !ok {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inbox: message %s: %w", m.ID, err)
	}
	blob, err := claimcheck.Fetch(ctx, blobs, ref)
	if err != nil {
		return fmt.Errorf("inbox: message %s: %w", m.ID, err)
	}
	m.Payload = blob
	claimcheck.RemoveHeaders(m.Headers)
	return nil
}

// Open opens the message's payload when it arrived sealed (a route that
// passes sealed payloads on, see package seal), with the key keys holds
// for it: Payload becomes the plain payload and the seal headers are
// removed; headers sealed with the payload join Headers. A message that
// is not sealed is left as it is. The error wraps
// seal.ErrErased when the subject's key was erased, seal.ErrUnknownKey
// when keys lacks it, seal.ErrAuthentication when it was tampered with.
func (m *Message) Open(ctx context.Context, keys seal.KeyProvider) error {
	if _, _, sealed := seal.Sealed(m.Headers); !sealed {
		return nil
	}
	plain, hidden, err := seal.OpenMessage(ctx, keys, m.ID, m.Headers, m.Payload)
	if err != nil {
		return fmt.Errorf("inbox: message %s: %w", m.ID, err)
	}
	m.Payload = plain
	for k := range m.Headers {
		if lk := strings.ToLower(k); lk == seal.HeaderAlgorithm || lk == seal.HeaderKeyID || lk == seal.HeaderSealedHeaders {
			delete(m.Headers, k)
		}
	}
	for k, v := range hidden {
		m.Headers[strings.ToLower(k)] = v
	}
	return nil
}
