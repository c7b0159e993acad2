// Package outboxnats is the nats:// destination: it publishes every
// message to NATS JetStream and counts it delivered only on the stream's
// PubAck.
//
// # URL
//
// The outbox command line opens it with outboxurl (see
// docs/brokers/nats.md for every parameter):
//
//	nats://[user:pass@|token@]host:4222[,host2:4222][?token=T&name=N&max_pending=N&reconnect_wait=D&connect_timeout=D&tls=true&ca_file=…&cert_file=…&key_file=…&server_name=…]
//
// In Go, wrap the JetStream context you already configured:
//
//	nc, _ := nats.Connect(url, nats.MaxReconnects(-1))
//	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4000))
//	p, _ := outboxnats.New(js, nil)
//
// # Wire format
//
// The JetStream subject is the envelope's destination (the topic unless
// the route names another). The body is the payload, byte for byte. The
// NATS headers are:
//
//	Nats-Msg-Id: <message id>          JetStream drops a resend within the stream's duplicate window
//	outbox-topic: <topic>
//	outbox-business-key: <key>         when the message has one
//	content-type: <content type>
//	traceparent, tracestate            when the producer had a trace
//	<every header the producer set>    names as stored (lower case)
//
// NATS keeps header names as sent and nats.Header.Get is case-sensitive:
// read them with the names above. A header value loses its leading and
// trailing blanks on the wire (the NATS header format trims them).
//
// With Config.CloudEvents (format=cloudevents in the URL) every message
// is a CloudEvent in binary content mode instead, per the CloudEvents NATS
// binding: headers ce-specversion, ce-id, ce-source, ce-type, ce-time,
// ce-subject, ce-datacontenttype (values percent-encoded), Nats-Msg-Id,
// the plain traceparent and the producer's own; no outbox-* headers. See
// package outboxce.
//
// # Results
//
// A batch is published with PublishMsgAsync, bounded by the JetStream
// context's WithPublishAsyncMaxPending, and every PubAck is awaited until
// the publish context ends. A PubAck is success, a duplicate one too (the
// stream already holds the message). Failures are classified:
//
//   - permanent (dead at once): no stream captures the subject, the
//     message is over the server's max_payload or the stream's
//     max_msg_size, the subject is not a valid NATS subject (empty
//     tokens, wildcards, blanks, a $-prefixed system subject), a header
//     NATS cannot carry or one named Nats-* (JetStream control headers
//     such as Nats-Rollup or Nats-Expected-Stream must not come from row
//     data);
//   - unavailable (the route goes down, attempts are not counted): the
//     connection is closed, disconnected or reconnecting when the message
//     would be sent;
//   - unknown (retried; Nats-Msg-Id makes a resend harmless): no PubAck
//     before the publish context ended, or the connection dropped while
//     the PubAck was awaited;
//   - transient (retried with backoff): stream limits reached (storage
//     full, discard-new), a stream that exists but did not answer (a
//     leader election), other JetStream API errors.
//
// The publisher does not implement publisher.Checker: JetStream can only
// tell whether a message id is within its duplicate window by receiving
// the message again, which is exactly what a retry does.
//
// # Consuming
//
// Consume runs a durable pull consumer and hands each message, decoded by
// Decode, to a handler as an *inbox.Message: acked when the handler
// returns nil, nakked (redelivered) when it fails, terminated when it
// carries no Nats-Msg-Id. Wrap the handler with inbox.Handle to apply
// each message exactly once.
package outboxnats
