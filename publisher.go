package outbox

import "github.com/txoutbox/outbox/publisher"

// The publisher contract, under the names a relay's configuration uses.
// Package publisher defines them, with the error classes (Permanent,
// RetryAfter, Unavailable, Unknown) and the wire header names.
type (
	// Envelope is a message on its way to a destination.
	Envelope = publisher.Envelope
	// Publisher delivers envelopes to one kind of destination and reports
	// one result per message.
	Publisher = publisher.Publisher
	// RunPublisher is a Publisher that keeps a key's order within a call.
	RunPublisher = publisher.RunPublisher
	// Checker answers whether a destination already has a message.
	Checker = publisher.Checker
	// PublisherFunc delivers one envelope at a time by calling a function.
	PublisherFunc = publisher.Func
)
