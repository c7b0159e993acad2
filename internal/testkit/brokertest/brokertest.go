// Package brokertest holds the suites that the tests of every broker
// package (outboxkafka, outboxamqp, outboxnats, outboxredis, outboxmqtt)
// run on the real broker, beside the publisher conformance suite of
// publishertest:
//
//   - RunConsume: what the package's Consume makes of what its Publisher
//     sent — the message decoded with the producer's trace, a message
//     that is not the outbox's never handed to the handler, a failed
//     handler's message redelivered with its effect applied once through
//     an inbox, and rows inserted with plain SQL going through a relay
//     that publishes everything twice and a consumer that loses acks,
//     every message applied exactly once.
//   - RunRelay: a row inserted with plain SQL arrives with the wire
//     format of the contract, destinations that cannot take a message
//     send it dead at the first attempt with the reason, and sealed
//     payloads arrive opened or sealed as their route says.
//   - RunCrash: an `outbox relay` process killed mid-stream, again and
//     again, while a consumer applies every delivery through an inbox.
//   - RunOutage: the broker goes away for 10 s under a steady flow and
//     comes back; nothing is lost, nothing is dead, no attempt is burnt.
//
// A broker's test describes its broker once, as a Target (which embeds
// the publishertest.Target of its conformance test), with Features for
// what the broker does differently, and calls Run (conformance, consume
// and relay suites), RunCrash and RunOutage. The suites need
// PostgreSQL (see testdb); a missing service fails them under CI=true.
package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// traceParent is the producer's trace in the suites' messages; traceID is
// its trace id, which a consumer's handler must find in its context.
const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// Handler is a consumer's handler, as the broker packages' Consume take it.
type Handler func(ctx context.Context, m *inbox.Message) error

// Target is one broker under test: the publisher conformance target
// (Publisher, NewDestination, Receive… of publishertest) and the means to
// consume from it with the broker package's own consumer.
type Target struct {
	publishertest.Target

	// Consume runs the broker package's Consume on dest with handler
	// until the test ends, failing the test if it returns an error. It
	// returns once the consumer is in place (subscribed, its group
	// created): what is published after it returns reaches handler.
	// Required by RunConsume and RunCrash.
	Consume func(t *testing.T, dest string, handler Handler)
	// PublishForeign puts at dest a message the outbox did not publish
	// (no message id), which Consume must never hand to a handler.
	// Optional: nil skips that check.
	PublishForeign func(t *testing.T, dest string)
	// Settled reports whether every message at dest has been
	// acknowledged by the consumer (nothing pending, nothing awaiting an
	// ack), so that the suite can tell that no redelivery is coming.
	// Optional: without it the suite allows 300 ms for a stray delivery.
	Settled func(t *testing.T, dest string) bool
	// Stored is how many messages dest holds, copies included. Optional:
	// with it the end-to-end test checks that the relay's copies are all
	// there (or, with DedupesByID, that there is one per message).
	Stored func(t *testing.T, dest string) int
	// BadDestinations are destinations a message cannot be published
	// to, with what the relay must say about it. Optional.
	BadDestinations func(t *testing.T) []BadDestination
	// URL is the broker as `outbox relay --to` takes it. Required by
	// RunCrash.
	URL string

	Broker Features
}

// Features says what a broker does differently from the common case.
type Features struct {
	// RedeliversOnReconnect: the broker gives a failed handler's message
	// back only when the consumer reconnects (MQTT: there is no negative
	// acknowledgement). Each failure costs a reconnection, so the
	// redelivery test fails the handler once instead of twice.
	RedeliversOnReconnect bool
	// DedupesByID: the broker drops a message whose id it has already
	// stored (JetStream's Nats-Msg-Id): of the relay publishing each
	// message twice, the end-to-end test expects one copy at the consumer
	// and in Stored.
	DedupesByID bool
	// KeepsOrder: each key's messages reach the handler in the order they
	// were enqueued (at their first delivery). False where the consumer
	// runs handlers concurrently, as a Redis group of two consumers does.
	KeepsOrder bool
}

// BadDestination is a destination that cannot take a message.
type BadDestination struct {
	// Topic is the message topic (and destination) to enqueue.
	Topic string
	// Says are strings last_error must contain.
	Says []string
	// LastError, when set, is exactly what last_error must be.
	LastError string
	// Check runs once the messages have settled, for what only the
	// broker can tell (the relay created nothing, …). Optional.
	Check func(t *testing.T)
}

// Run runs the suites a broker passes on the targets newTarget makes, as
// subtests one after the other: Conformance (publishertest.Run), Consume
// (RunConsume) and Relay (RunRelay).
func Run(t *testing.T, newTarget func(t *testing.T) *Target) {
	t.Helper()
	t.Run("Conformance", func(t *testing.T) {
		publishertest.Run(t, func(t *testing.T) *publishertest.Target { return &newTarget(t).Target })
	})
	t.Run("Consume", func(t *testing.T) { RunConsume(t, newTarget) })
	t.Run("Relay", func(t *testing.T) { RunRelay(t, newTarget) })
}

// suiteCase is one named test of a suite.
type suiteCase struct {
	name string
	fn   func(t *testing.T, tg *Target)
}

// runParallel runs cases as parallel subtests, each on a target of its
// own from newTarget.
func runParallel(t *testing.T, newTarget func(t *testing.T) *Target, cases []suiteCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newTarget(t))
		})
	}
}

// wait receives from ch, failing the test after d.
func wait[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		var zero T
		return zero
	}
}
