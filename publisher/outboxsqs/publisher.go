package outboxsqs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/internal/awswire"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Config defaults and limits.
const (
	// DefaultMaxMessageBytes is the largest message sent, and the largest
	// SendMessageBatch, as SQS counts them (body plus every attribute's
	// name, type and value): the limit every queue has accepted.
	DefaultMaxMessageBytes = 262144
	// MaxMessageBytesLimit is the most MaxMessageBytes may be: the largest
	// MaximumMessageSize a queue can have.
	MaxMessageBytesLimit = 1048576
	// MaxBatchEntries is the most entries one SendMessageBatch takes.
	MaxBatchEntries = 10
	// DefaultConcurrency is how many SendMessageBatch calls one Publish
	// makes at a time.
	DefaultConcurrency = 4
	// MaxQueueNameLen is the longest queue name, ".fifo" included.
	MaxQueueNameLen = 80
)

// ErrClosed is returned for every message published after Close.
var ErrClosed = errors.New("outboxsqs: publisher is closed")

// Config configures a Publisher. nil is valid: every message goes to the
// queue its envelope's destination names (a queue name, resolved with
// GetQueueUrl once and kept).
type Config struct {
	// QueueURL is the queue every message goes to, whatever its
	// destination. Defaults to "": the destination is a queue name,
	// resolved with GetQueueUrl once and kept.
	QueueURL string
	// QueueName is the queue every message goes to, whatever its
	// destination, by name: resolved with GetQueueUrl once and kept. Not
	// with QueueURL. Defaults to "".
	QueueName string
	// QueueOwner is the AWS account that owns the queues named by
	// destinations, when it is not the caller's. Defaults to "".
	QueueOwner string
	// MaxMessageBytes is the largest message, and the largest batch call,
	// sent; a message over it goes dead with the reason. Raise it (up to
	// MaxMessageBytesLimit) for queues whose MaximumMessageSize is larger.
	// Defaults to DefaultMaxMessageBytes (262,144).
	MaxMessageBytes int
	// Concurrency is how many SendMessageBatch calls one Publish makes at
	// a time. Defaults to DefaultConcurrency (4).
	Concurrency int
	// ThrottleWait is how long the route is held when SQS throttles a
	// call. Defaults to DefaultThrottleWait (1 s).
	ThrottleWait time.Duration
	// CloudEvents, when set, sends every message as a CloudEvent in
	// binary mode: ce- message attributes (see Binding). Defaults to nil,
	// the plain wire.
	CloudEvents *outboxce.Format
	// Logger receives queue name resolutions at debug level. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Publisher sends envelopes to SQS with SendMessageBatch. It is safe for
// concurrent use.
type Publisher struct {
	client    *sqs.Client
	queueURL  string
	queueName string
	owner     string
	log       *slog.Logger
	batch     *awswire.Batcher

	mu     sync.Mutex
	queues map[string]string // queue name → URL
}

var _ publisher.Publisher = (*Publisher)(nil)

// New returns a Publisher over client, an SQS client the caller
// configured (region, credentials, endpoint, retries).
func New(client *sqs.Client, cfg *Config) (*Publisher, error) {
	if client == nil {
		return nil, errors.New("outboxsqs: nil SQS client")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	switch {
	case cfg.MaxMessageBytes < 0 || cfg.MaxMessageBytes > MaxMessageBytesLimit:
		return nil, fmt.Errorf("outboxsqs: Config.MaxMessageBytes %d is not between 1 and %d", cfg.MaxMessageBytes, MaxMessageBytesLimit)
	case cfg.Concurrency < 0:
		return nil, errors.New("outboxsqs: Config.Concurrency must not be negative")
	case cfg.ThrottleWait < 0:
		return nil, errors.New("outboxsqs: Config.ThrottleWait must not be negative")
	case cfg.QueueURL != "" && cfg.QueueName != "":
		return nil, errors.New("outboxsqs: Config.QueueURL and Config.QueueName both set; give one")
	case cfg.QueueName != "" && ValidQueueName(cfg.QueueName) != nil:
		return nil, fmt.Errorf("outboxsqs: Config.QueueName: %v", strings.TrimPrefix(ValidQueueName(cfg.QueueName).Error(), "outboxsqs: "))
	case cfg.QueueURL != "" && !strings.HasPrefix(cfg.QueueURL, "https://") && !strings.HasPrefix(cfg.QueueURL, "http://"):
		return nil, fmt.Errorf("outboxsqs: Config.QueueURL %q is not a queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)", cfg.QueueURL)
	}
	if err := cfg.CloudEvents.Validate(); err != nil {
		return nil, fmt.Errorf("outboxsqs: Config.CloudEvents: %v", err)
	}
	if cfg.CloudEvents.IsStructured() {
		return nil, errors.New("outboxsqs: Config.CloudEvents: structured mode is for webhooks; use binary mode")
	}
	p := &Publisher{
		client:    client,
		queueURL:  cfg.QueueURL,
		queueName: cfg.QueueName,
		owner:     cfg.QueueOwner,
		log:       cmp.Or(cfg.Logger, slog.Default()),
		queues:    map[string]string{},
	}
	p.batch = &awswire.Batcher{
		Pkg: "outboxsqs", Dest: "queue", Service: "SQS", Op: "SendMessageBatch",
		CloudEvents: cfg.CloudEvents, Binding: Binding,
		MaxEntries: MaxBatchEntries, MaxBytes: cmp.Or(cfg.MaxMessageBytes, DefaultMaxMessageBytes),
		Concurrency:  cmp.Or(cfg.Concurrency, DefaultConcurrency),
		ThrottleWait: cmp.Or(cfg.ThrottleWait, DefaultThrottleWait),
		ErrClosed:    ErrClosed,
		Kind:         kindOf,
		Call:         p.call,
	}
	return p, nil
}

// Publish sends the batch with SendMessageBatch calls of at most 10
// entries and MaxMessageBytes each, a few at a time. Results are in batch
// order; nil only for a message SQS reported stored.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	type resolved struct {
		url string
		err error
	}
	queues := map[string]resolved{} // each destination resolved once per call
	return p.batch.Publish(ctx, batch, func(env *publisher.Envelope) (string, error) {
		r, ok := queues[env.Destination]
		if !ok {
			r.url, r.err = p.queue(ctx, env.Destination)
			queues[env.Destination] = r
		}
		return r.url, r.err
	})
}

// call makes one SendMessageBatch call of entries to queue (a URL).
func (p *Publisher) call(ctx context.Context, queue string, entries []*awswire.Entry) (*awswire.Answer, awswire.Failure, error) {
	in := &sqs.SendMessageBatchInput{QueueUrl: &queue, Entries: make([]types.SendMessageBatchRequestEntry, len(entries))}
	for n, e := range entries {
		in.Entries[n] = input(e)
	}
	var sent atomic.Bool
	out, err := p.client.SendMessageBatch(ctx, in, markSent(&sent))
	if err != nil {
		how, cerr := p.callError(ctx, "queue "+queue+": SendMessageBatch", err, sent.Load())
		if missingQueue(err) {
			p.forget(queue)
		}
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

// input is the SendMessageBatch entry of e.
func input(e *awswire.Entry) types.SendMessageBatchRequestEntry {
	in := types.SendMessageBatchRequestEntry{
		Id:                aws.String(e.ID()),
		MessageBody:       &e.Wire.Body,
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
func markSent(sent *atomic.Bool) func(*sqs.Options) {
	return func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("outboxsqsSent",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					sent.Store(true)
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}

// queue returns the URL of the queue env's destination goes to.
func (p *Publisher) queue(ctx context.Context, dest string) (string, error) {
	if p.queueURL != "" {
		return p.queueURL, nil
	}
	if p.queueName != "" {
		dest = p.queueName
	}
	if err := ValidQueueName(dest); err != nil {
		return "", publisher.Permanent(err)
	}
	p.mu.Lock()
	u, ok := p.queues[dest]
	p.mu.Unlock()
	if ok {
		return u, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: &dest}
	if p.owner != "" {
		in.QueueOwnerAWSAccountId = &p.owner
	}
	var sent atomic.Bool
	out, err := p.client.GetQueueUrl(ctx, in, markSent(&sent))
	if err != nil {
		if missingQueue(err) {
			return "", publisher.Unavailable(fmt.Errorf("outboxsqs: queue %s does not exist (GetQueueUrl: %s)", dest, awswire.OneLine(err.Error())))
		}
		how, cerr := p.callError(ctx, "queue "+dest+": GetQueueUrl", err, sent.Load())
		if how == awswire.FailMessages {
			// A refusal about the queue, not the message.
			cerr = publisher.Unavailable(cerr)
		}
		return "", cerr
	}
	u = aws.ToString(out.QueueUrl)
	if u == "" {
		return "", fmt.Errorf("outboxsqs: queue %s: GetQueueUrl answered no URL", dest)
	}
	p.mu.Lock()
	p.queues[dest] = u
	p.mu.Unlock()
	p.log.Debug("outboxsqs: queue resolved", "queue", dest, "url", u)
	return u, nil
}

// forget drops a queue URL that turned out not to exist any more, so the
// next message resolves its name again.
func (p *Publisher) forget(url string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, u := range p.queues {
		if u == url {
			delete(p.queues, name)
		}
	}
}

// Close makes later Publish calls fail. The client is the caller's.
func (p *Publisher) Close() error {
	p.batch.Close()
	return nil
}

// ValidQueueName says why name cannot be an SQS queue name: 1 to 80
// characters, ".fifo" included, of A-Z, a-z, 0-9, '-' and '_', with an
// optional ".fifo" suffix.
func ValidQueueName(name string) error {
	base := strings.TrimSuffix(name, ".fifo")
	switch {
	case name == "":
		return errors.New("outboxsqs: empty destination: no queue name (set the queue in the URL or Config.QueueURL, or route to a queue name)")
	case len(name) > MaxQueueNameLen:
		return fmt.Errorf("outboxsqs: destination %.40q… cannot be a queue name: longer than %d characters", name, MaxQueueNameLen)
	case base == "":
		return fmt.Errorf("outboxsqs: destination %q cannot be a queue name: nothing before .fifo", name)
	}
	if !awswire.PlainName(base) {
		return fmt.Errorf("outboxsqs: destination %q cannot be a queue name: only letters, digits, '-' and '_' (and a .fifo suffix) are allowed", name)
	}
	return nil
}

// GroupID is the MessageGroupId of a business key (the topic when the
// message has none) on a FIFO queue: the key itself when it is 1 to 128
// characters of letters, digits and ASCII punctuation, as SQS requires;
// otherwise "sha256-" and the hex SHA-256 of the key, so that each key
// still has a group of its own.
func GroupID(key string) string { return awswire.GroupID(key) }
