// Package outboxkinesis is the kinesis:// destination: it writes every
// message to an Amazon Kinesis Data Streams stream with PutRecords and
// counts it delivered only when the service returned the record's
// sequence number. It is a module of its own, so that the AWS SDK enters
// only the programs that import it.
//
// # URL
//
//	kinesis://STREAM?region=R&endpoint=E       every message to STREAM
//	kinesis://?stream_arn=ARN&region=R         every message to the stream ARN names
//	kinesis://?region=R                        the message's destination (its topic, or the route's destination) names the stream
//
// OpenURL loads the AWS configuration the SDK's default way (environment,
// shared files, web identity, container and instance roles); endpoint (or
// AWS_ENDPOINT_URL_KINESIS) points it at another endpoint. In Go, wrap the
// client you configured:
//
//	cfg, _ := config.LoadDefaultConfig(ctx)
//	p, _ := outboxkinesis.New(kinesis.NewFromConfig(cfg), &outboxkinesis.Config{Stream: "orders"})
//
// # Record
//
// A Kinesis record is bytes and a partition key, nothing else, so the
// message's id, topic, key and headers travel inside the data, as one
// JSON object (docs/brokers/kinesis.md is the contract for consumers in
// other languages):
//
//	{"message_id":"…","topic":"order.created","business_key":"order-42",
//	 "headers":{"content-type":"application/json","outbox-topic":"order.created",…},
//	 "payload":{"order_id":42}}
//
// A JSON payload (content type JSON, valid UTF-8 JSON without blanks
// around it) is embedded as it is, byte for byte; any other payload goes
// as "payload_base64" instead of "payload". business_key is left out when
// the message has none.
//
// With Config.CloudEvents (format=cloudevents in the URL) the data is one
// CloudEvent in the JSON event format instead (Kinesis has no binary
// binding): specversion, id, source, type (the topic), time,
// datacontenttype, subject (the key), traceparent, tracestate, data or
// data_base64; each producer header whose name is a free extension name
// (lower-case letters and digits) as an extension attribute, the others
// together in the extension "outboxheaders", a string holding a JSON
// object. Decode reads both forms.
//
// The partition key is the business key, or the message id when there is
// none. A key longer than 256 characters becomes "sha256:" and the hex
// SHA-256 of its bytes: stable, so the key's messages share a shard.
//
// # Order
//
// Kinesis keeps a shard's records in the order it stored them, but one
// PutRecords call may store some records and fail others, in any order.
// The Publisher is a publisher.RunPublisher: the relay may hand it a run
// of a key's messages in one call. It sends them in rounds, each
// PutRecords call carrying at most one message per key, the next round
// only after the previous one was answered; once a key's message failed
// (other than permanently), the key's later messages in the call are not
// sent and fail with "not sent". So a key's message is never stored after
// an earlier one that failed, and the relay sends the failed one again
// first.
//
// # Results
//
// A batch is split into calls of at most 500 records and
// Config.MaxRequestBytes (5 MiB), one stream per call. Each record's
// answer is its message's result:
//
//   - nil: the record has a sequence number;
//   - ProvisionedThroughputExceededException (the shard's write limit):
//     publisher.RetryAfter(Config.ThrottleWait), the route is held;
//   - InternalFailure and other codes: transient, retried.
//
// A call that fails as a whole is classified by the SDK's error types and
// codes: missing stream, denied access, refused credentials, KMS key
// unusable, endpoint unreachable → publisher.Unavailable; throttling →
// RetryAfter; a call refused as invalid → each record is sent alone, and
// the one still refused is Permanent; a deadline or a connection lost
// after sending → publisher.Unknown. A record over Config.MaxRecordBytes
// (1 MiB with its partition key) or a destination that cannot be a stream
// name is Permanent before anything is sent.
//
// The Publisher is no publisher.Checker: Kinesis cannot look a record up
// by message id. Consumers dedupe by message id (package inbox).
//
// # Consuming
//
// Decode turns a record into an *inbox.Message. Consume is a plain shard
// reader (not the Kinesis Client Library): it reads every shard from
// TRIM_HORIZON (or a given position), one record at a time per shard in
// order, hands a record whose handler failed to it again, and keeps no
// checkpoint of its own (ConsumeOptions.Checkpoint reports them, After
// resumes from them). Wrap the handler with inbox.Handle: a restart reads
// again, and the inbox makes redelivery harmless.
package outboxkinesis
