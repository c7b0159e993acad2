// Package outboxsqs is the sqs:// destination: it sends every message to
// an Amazon SQS queue with SendMessageBatch and counts it delivered only
// when SQS reports that entry stored. It also has the consumer side,
// Decode and Consume.
//
// # URL
//
// The outbox command line opens it with OpenURL (see docs/brokers/sqs.md
// for every parameter):
//
//	sqs://QUEUE-NAME?region=R[&endpoint=E]           one queue, by name
//	sqs://HOST/ACCOUNT-ID/QUEUE-NAME[?region=R]      one queue, by its URL
//	sqs://?region=R                                  the queue the destination names
//
// In Go, wrap the client you configured:
//
//	cfg, _ := config.LoadDefaultConfig(ctx)
//	p, _ := outboxsqs.New(sqs.NewFromConfig(cfg), &outboxsqs.Config{QueueURL: url})
//
// # Wire format
//
// The body is the payload as text, or its base64 with the attribute
// outbox-body-encoding=base64 when SQS cannot carry it as text. Every
// message has the String attribute message-id (the message id); the
// headers (outbox-topic, outbox-business-key, content-type, traceparent,
// tracestate, then the producer's by name) follow as attributes of their
// own while SQS's limit of 10 allows, and the rest travel as one JSON
// object in outbox-headers. On a FIFO queue (.fifo) MessageGroupId is
// the business key (the topic when none, see GroupID) and
// MessageDeduplicationId the message id. With Config.CloudEvents the
// event's attributes travel as ce- attributes (see Binding).
//
// # Results
//
// Each entry of a SendMessageBatch answer is the result of its message:
// stored is nil; a sender-fault failure is permanent unless its code is
// throttling (RetryAfter) or about the queue's KMS key (Unavailable); a
// service-side failure is transient. A whole call throttled holds the
// route (RetryAfter); a missing queue, denied access, bad credentials or
// an unreachable endpoint take it down (Unavailable); a 5xx answer or a
// timeout after sending is Unknown. A message too large for the limit, a
// reserved header or a destination that cannot be a queue name is
// permanent before any call.
//
// # Consuming
//
// Consume long-polls a queue and hands each message, decoded by Decode,
// to a handler as an *inbox.Message with the producer's trace in its
// context: deleted when the handler returns nil, left to reappear after
// its visibility timeout (renewed while the handler runs) when it fails.
// Wrap the handler with inbox.Handle to apply each message exactly once.
// Decode also reads messages an SNS topic delivered to the queue, with or
// without raw message delivery.
package outboxsqs
