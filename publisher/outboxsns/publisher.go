package outboxsns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/internal/awswire"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Limits and defaults.
const (
	// MaxMessageBytes is the largest message, and the largest
	// PublishBatch, SNS takes, as it counts them (the message plus every
	// attribute's name, type and value).
	MaxMessageBytes = 262144
	// MaxBatchEntries is the most entries one PublishBatch takes.
	MaxBatchEntries = 10
	// DefaultConcurrency is how many PublishBatch calls one Publish makes
	// at a time.
	DefaultConcurrency = 4
)

// ErrClosed is returned for every message published after Close.
var ErrClosed = errors.New("outboxsns: publisher is closed")

// Config configures a Publisher. nil is valid: every message goes to the
// topic whose ARN its envelope's destination is.
type Config struct {
	// TopicARN is the topic every message goes to, whatever its
	// destination (arn:aws:sns:REGION:ACCOUNT:NAME). Defaults to "": the
	// destination is the topic's ARN.
	TopicARN string
	// Concurrency is how many PublishBatch calls one Publish makes at a
	// time. Defaults to DefaultConcurrency (4).
	Concurrency int
	// ThrottleWait is how long the route is held when SNS throttles a
	// call. Defaults to DefaultThrottleWait (1 s).
	ThrottleWait time.Duration
	// CloudEvents, when set, sends every message as a CloudEvent in
	// binary mode: ce- message attributes (see Binding). Defaults to nil,
	// the plain wire.
	CloudEvents *outboxce.Format
}

// Publisher publishes envelopes to SNS with PublishBatch. It is safe for
// concurrent use.
type Publisher struct {
	client   *sns.Client
	topicARN string
	batch    *awswire.Batcher
}

var _ publisher.Publisher = (*Publisher)(nil)

// New returns a Publisher over client, an SNS client the caller
// configured (region, credentials, endpoint, retries).
func New(client *sns.Client, cfg *Config) (*Publisher, error) {
	if client == nil {
		return nil, errors.New("outboxsns: nil SNS client")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	switch {
	case cfg.Concurrency < 0:
		return nil, errors.New("outboxsns: Config.Concurrency must not be negative")
	case cfg.ThrottleWait < 0:
		return nil, errors.New("outboxsns: Config.ThrottleWait must not be negative")
	}
	if cfg.TopicARN != "" {
		if err := ValidTopicARN(cfg.TopicARN); err != nil {
			return nil, fmt.Errorf("outboxsns: Config.TopicARN: %v", strings.TrimPrefix(err.Error(), "outboxsns: "))
		}
	}
	if err := cfg.CloudEvents.Validate(); err != nil {
		return nil, fmt.Errorf("outboxsns: Config.CloudEvents: %v", err)
	}
	if cfg.CloudEvents.IsStructured() {
		return nil, errors.New("outboxsns: Config.CloudEvents: structured mode is for webhooks; use binary mode")
	}
	p := &Publisher{client: client, topicARN: cfg.TopicARN}
	p.batch = &awswire.Batcher{
		Pkg: "outboxsns", Dest: "topic", Service: "SNS", Op: "PublishBatch",
		CloudEvents: cfg.CloudEvents, Binding: Binding,
		MaxEntries: MaxBatchEntries, MaxBytes: MaxMessageBytes,
		Concurrency:  cmp.Or(cfg.Concurrency, DefaultConcurrency),
		ThrottleWait: cmp.Or(cfg.ThrottleWait, DefaultThrottleWait),
		ErrClosed:    ErrClosed,
		Kind:         kindOf,
		Call:         p.call,
	}
	return p, nil
}

// Publish sends the batch with PublishBatch calls of at most 10 entries
// and 256 KiB each, a few at a time. Results are in batch order; nil
// only for a message SNS reported published.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	return p.batch.Publish(ctx, batch, p.topic)
}

// topic is the ARN of the topic env goes to.
func (p *Publisher) topic(env *publisher.Envelope) (string, error) {
	if p.topicARN != "" {
		return p.topicARN, nil
	}
	if err := ValidTopicARN(env.Destination); err != nil {
		return "", publisher.Permanent(err)
	}
	return env.Destination, nil
}

// call makes one PublishBatch call of entries to topic.
func (p *Publisher) call(ctx context.Context, topic string, entries []*awswire.Entry) (*awswire.Answer, awswire.Failure, error) {
	in := &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: make([]types.PublishBatchRequestEntry, len(entries))}
	for n, e := range entries {
		in.PublishBatchRequestEntries[n] = input(e)
	}
	var sent atomic.Bool
	out, err := p.client.PublishBatch(ctx, in, markSent(&sent))
	if err != nil {
		how, cerr := p.callError(ctx, "topic "+topic+": PublishBatch", err, sent.Load())
		return nil, how, cerr
	}
	a := &awswire.Answer{}
	for _, s := range out.Successful {
		a.Done = append(a.Done, aws.ToString(s.Id))
	}
	for _, f := range out.Failed {
		a.Failed = append(a.Failed, awswire.Failed{ID: aws.ToString(f.Id), Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault})
	}
	return a, awswire.FailRoute, nil
}

// input is the PublishBatch entry of e.
func input(e *awswire.Entry) types.PublishBatchRequestEntry {
	in := types.PublishBatchRequestEntry{
		Id:                aws.String(e.ID()),
		Message:           &e.Wire.Body,
		MessageAttributes: make(map[string]types.MessageAttributeValue, len(e.Wire.Attrs)),
	}
	for _, a := range e.Wire.Attrs {
		in.MessageAttributes[a.Name] = types.MessageAttributeValue{DataType: aws.String(awswire.AttrType), StringValue: aws.String(a.Value)}
	}
	if e.Group != "" {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(e.Group), aws.String(e.Env.ID)
	}
	return in
}

// markSent is a call option that sets *sent once the request, signed,
// goes to the transport: an error before that means nothing was sent.
func markSent(sent *atomic.Bool) func(*sns.Options) {
	return func(o *sns.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("outboxsnsSent",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					sent.Store(true)
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}

// Close makes later Publish calls fail. The client is the caller's.
func (p *Publisher) Close() error {
	p.batch.Close()
	return nil
}

// ValidTopicARN says why s cannot be an SNS topic ARN:
// arn:PARTITION:sns:REGION:ACCOUNT:NAME, NAME 1 to 256 of letters,
// digits, '-' and '_' with an optional .fifo suffix.
func ValidTopicARN(s string) error {
	parts := strings.Split(s, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "sns" || parts[3] == "" || parts[4] == "" {
		return fmt.Errorf("outboxsns: destination %q is not a topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", s)
	}
	name := strings.TrimSuffix(parts[5], ".fifo")
	if name == "" || len(parts[5]) > 256 {
		return fmt.Errorf("outboxsns: destination %q is not a topic ARN: the topic name is empty or longer than 256", s)
	}
	if !awswire.PlainName(name) {
		return fmt.Errorf("outboxsns: destination %q is not a topic ARN: a topic name has only letters, digits, '-' and '_' (and a .fifo suffix)", s)
	}
	return nil
}

// GroupID is the MessageGroupId of a business key (the topic when the
// message has none) on a FIFO topic: the key itself when it is 1 to 128
// characters of letters, digits and ASCII punctuation; otherwise
// "sha256-" and the hex SHA-256 of the key, so that each key still has a
// group of its own. It is the same as outboxsqs.GroupID.
func GroupID(key string) string { return awswire.GroupID(key) }
