// Package outboxpubsub is the pubsub:// destination: it publishes every
// message to Google Cloud Pub/Sub and counts it delivered only when the
// service answered with its Pub/Sub message ID.
//
// It is a Go module of its own, so that the Pub/Sub client enters only
// the programs that import it.
//
// # URL
//
// The outbox command opens it with OpenURL (see docs/brokers/pubsub.md):
//
//	pubsub://PROJECT/TOPIC[?endpoint=HOST:PORT|region=REGION][&ordering=false][&format=cloudevents]
//	pubsub://PROJECT       each message to the topic its destination names
//
// In Go, wrap a client made with ClientConfig:
//
//	client, _ := pubsub.NewClientWithConfig(ctx, "my-project", outboxpubsub.ClientConfig())
//	p, _ := outboxpubsub.New(client, &outboxpubsub.Config{Topic: "orders"})
//
// # Wire format
//
// The topic is Config.Topic, else the envelope's destination (a topic ID
// of the client's project, or projects/P/topics/T). The data is the
// payload, byte for byte. The attributes are:
//
//	message-id: <message id>           consumers dedupe by it
//	outbox-topic: <topic>
//	outbox-business-key: <key>         when the message has one
//	content-type: <content type>
//	traceparent, tracestate            when the producer had a trace
//	<every header the producer set>    names as stored
//
// The ordering key is the business key (none for a message without one,
// or with Config.DisableOrdering). A header that cannot be an attribute
// (a key over 256 bytes or starting with goog, a value over 1024 bytes,
// not UTF-8, more than 100 attributes) makes the message permanent: it
// goes dead with the reason instead of losing the header. So does a
// message over the 10 MB publish request limit, and a business key over
// the 1024 bytes of an ordering key.
//
// With Config.CloudEvents (format=cloudevents in the URL) every message
// is a CloudEvent in binary content mode per the CloudEvents Pub/Sub
// binding: attributes ce-specversion, ce-id, ce-source, ce-type, ce-time,
// ce-subject, ce-traceparent/ce-tracestate, content-type, the plain
// traceparent, message-id and the producer's own headers; no outbox-*
// attributes.
//
// # Order
//
// A batch is handed to the client at once. With ordering keys the client
// sends each key's messages one request at a time, in order, and after a
// failure it pauses the key: every later message of that key fails
// without being sent. Publish resumes a key only when the relay brings it
// again — to retry the message that failed — so a later message of the
// key never overtakes it. The Publisher is a publisher.RunPublisher.
//
// # Results
//
//   - RESOURCE_EXHAUSTED: publisher.RetryAfter (the route is held, the
//     message is not charged), for the answer's RetryInfo delay or
//     Config.ThrottleDelay;
//   - NOT_FOUND (no such topic), PERMISSION_DENIED, UNAUTHENTICATED,
//     UNAVAILABLE: publisher.Unavailable (the route goes down and is
//     probed);
//   - INVALID_ARGUMENT, oversized messages, headers that cannot be
//     attributes: publisher.Permanent;
//   - DEADLINE_EXCEEDED, or no answer before the publish call ended:
//     publisher.Unknown (retried; consumers dedupe by message-id);
//   - anything else, and a message not sent because an earlier message of
//     its key failed: transient.
//
// # Consuming
//
// Consume receives from a subscription and hands each message, decoded
// by Decode, to a handler as an *inbox.Message with the producer's trace
// in its context: acked when the handler returns nil, nacked (redelivered)
// when it fails. Wrap the handler with inbox.Handle to apply each message
// exactly once.
package outboxpubsub
