// Package outboxsns is the sns: destination: it publishes every message
// to an Amazon SNS topic with PublishBatch and counts it delivered only
// when SNS reports that entry published.
//
// # URL
//
// The outbox command line opens it with OpenURL (see docs/brokers/sns.md):
//
//	sns:arn:aws:sns:REGION:ACCOUNT:TOPIC[?region=R&endpoint=E]
//	sns:///arn:aws:sns:REGION:ACCOUNT:TOPIC[?…]
//	sns://?region=R              the topic ARN is the message's destination
//
// In Go, wrap the client you configured:
//
//	cfg, _ := config.LoadDefaultConfig(ctx)
//	p, _ := outboxsns.New(sns.NewFromConfig(cfg), &outboxsns.Config{TopicARN: arn})
//
// # Wire format
//
// The same as the SQS destination's (package outboxsqs): the payload as
// the message (base64 with outbox-body-encoding=base64 when it cannot be
// text), String attributes message-id, outbox-topic,
// outbox-business-key, content-type, traceparent, tracestate and the
// producer's headers, at most 10, the rest as one JSON object in
// outbox-headers; on a FIFO topic MessageGroupId is the business key (the
// topic when none) and MessageDeduplicationId the message id.
//
// # Consuming
//
// Consumers read an SQS queue subscribed to the topic, preferably with raw
// message delivery, and decode with outboxsqs.Decode, which also unwraps
// the SNS JSON envelope of a subscription without raw delivery.
//
// # Results
//
// Each entry of a PublishBatch answer is the result of its message.
// Throttling holds the route (RetryAfter); a missing topic, a refused
// authorization, bad credentials or an unreachable endpoint take it down
// (Unavailable); a sender-fault entry failure, a message over 256 KiB or
// a destination that is no topic ARN is permanent; a 5xx answer or a
// timeout after sending is Unknown.
package outboxsns
