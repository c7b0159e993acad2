package outboxsqs

import "github.com/txoutbox/outbox/publisher/internal/awswire"

// Attribute names of the wire besides the outbox headers (the form SQS
// and SNS share: docs/brokers/sqs.md).
const (
	// AttrMessageID carries the message id, on every message.
	AttrMessageID = awswire.AttrMessageID
	// AttrBodyEncoding is "base64" when the body is the base64 form of a
	// payload SQS cannot carry as text (not UTF-8, or characters outside
	// what it accepts); absent when the body is the payload itself.
	AttrBodyEncoding = awswire.AttrBodyEncoding
	// AttrHeaders carries, as one JSON object, the headers that do not
	// travel as attributes of their own: past the attribute limit, or
	// with a name or value an attribute cannot have.
	AttrHeaders = awswire.AttrHeaders
	// MaxAttributes is the most message attributes SQS carries on one
	// message.
	MaxAttributes = awswire.MaxAttributes
)

// Binding is how a CloudEvent travels over SQS in binary mode (there is
// no official CloudEvents binding for SQS): every attribute as a message
// attribute named ce-<attribute>, values as they are (attributes carry any
// text SQS accepts, so nothing is percent-encoded), datacontenttype as the
// content-type attribute.
var Binding = awswire.CEBinding("sqs")
