package publisher

// Header names the relay sets on every published message (CONTRACT §4).
const (
	// HeaderTopic carries the message's topic.
	HeaderTopic = "outbox-topic"
	// HeaderBusinessKey carries the business key, when the message has one.
	HeaderBusinessKey = "outbox-business-key"
	// HeaderContentType carries the payload's media type.
	HeaderContentType = "content-type"
	// HeaderTraceParent and HeaderTraceState carry the producer's W3C
	// trace context, when it had one.
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
	// HeaderTransferEncode is how a binary payload is stored in the table;
	// reserved, never sent.
	HeaderTransferEncode = "content-transfer-encoding"
)

// DefaultContentType is the content type of a message that names none.
const DefaultContentType = "application/json"
