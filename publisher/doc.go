// Package publisher is the contract between the outbox relay and a
// destination, as package driver is for databases: the [Envelope] the
// relay hands over, the [Publisher] that delivers it and reports one
// result per message, the error classes that tell the relay what a failure
// means, and the wire header names. The broker packages beside it
// (outboxkafka, outboxnats, outboxwebhook, …) implement it, and so may
// anyone's own code: this package imports nothing but the standard
// library, so a publisher written against it compiles without the relay.
//
// # The contract
//
// Publish gets a batch and returns one error per envelope, in order:
//
//   - nil only when the destination confirmed the message durably (a
//     broker's acknowledgement, a 2xx answer). Never nil for a message
//     whose delivery cannot be confirmed: the relay marks nil as sent.
//   - [Permanent]: retrying cannot help (rejected, too large, invalid).
//     The message goes dead at once with the error as its reason.
//   - [Unavailable]: the destination cannot be reached at all (connection
//     refused, not found, access denied). The route goes down and is probed;
//     the message is not charged an attempt.
//   - [RetryAfter]: the destination asked for a pause (throttling, HTTP
//     429/503 with Retry-After). The route is held that long.
//   - [Unknown]: the message may or may not have arrived (a timeout after
//     sending). It is retried, after asking the route's [Checker] first.
//   - anything else is transient: retried with backoff, counting the
//     attempt. Deadlines and timeouts count as Unknown without a mark.
//
// Envelopes in one batch never share a business key unless the publisher
// is a [RunPublisher] that says it keeps a key's order within a call.
// Publish must return when its context is done.
package publisher
