package outboxsns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// maxGroupIDLen is the longest MessageGroupId.
	maxGroupIDLen = 128
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
	client       *sns.Client
	topicARN     string
	concurrency  int
	throttleWait time.Duration
	ce           *outboxce.Format
	closed       atomic.Bool
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
	p := &Publisher{client: client, topicARN: cfg.TopicARN, concurrency: cfg.Concurrency, throttleWait: cfg.ThrottleWait, ce: cfg.CloudEvents}
	if p.concurrency == 0 {
		p.concurrency = DefaultConcurrency
	}
	if p.throttleWait == 0 {
		p.throttleWait = DefaultThrottleWait
	}
	return p, nil
}

// entry is one envelope on its way.
type entry struct {
	i     int
	env   *publisher.Envelope
	wire  *awswire.Wire
	input types.PublishBatchRequestEntry
}

// Publish sends the batch with PublishBatch calls of at most 10 entries
// and 256 KiB each, a few at a time. Results are in batch order; nil
// only for a message SNS reported published.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	if p.closed.Load() {
		for i := range errs {
			errs[i] = ErrClosed
		}
		return errs
	}
	byTopic := map[string][]*entry{}
	var order []string
	for i, env := range batch {
		if env == nil {
			errs[i] = publisher.Permanent(errors.New("outboxsns: nil envelope"))
			continue
		}
		topic := p.topicARN
		if topic == "" {
			topic = env.Destination
			if err := ValidTopicARN(topic); err != nil {
				errs[i] = publisher.Permanent(err)
				continue
			}
		}
		e, err := p.entry(i, env, topic)
		if err != nil {
			errs[i] = err
			continue
		}
		if _, ok := byTopic[topic]; !ok {
			order = append(order, topic)
		}
		byTopic[topic] = append(byTopic[topic], e)
	}
	var calls [][]*entry
	var callTopic []string
	for _, t := range order {
		for _, c := range awswire.Split(byTopic[t], entrySize, MaxBatchEntries, MaxMessageBytes) {
			calls = append(calls, c)
			callTopic = append(callTopic, t)
		}
	}
	sem := make(chan struct{}, p.concurrency)
	var wg sync.WaitGroup
	for n, c := range calls {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			p.send(ctx, callTopic[n], c, errs)
		}()
	}
	wg.Wait()
	return errs
}

// entry builds the batch entry of env, or the reason it cannot be sent.
func (p *Publisher) entry(i int, env *publisher.Envelope, topic string) (*entry, error) {
	w, err := awswire.Encode(env, p.ce, Binding)
	if err != nil {
		return nil, publisher.Permanent(fmt.Errorf("outboxsns: topic %s: message %s: %v", topic, env.ID, err))
	}
	if n := w.Size(); n > MaxMessageBytes {
		return nil, publisher.Permanent(fmt.Errorf("outboxsns: topic %s: message too large: %d bytes, SNS takes at most %d", topic, n, MaxMessageBytes))
	}
	in := types.PublishBatchRequestEntry{
		Id:                strPtr(strconv.Itoa(i)),
		Message:           &w.Body,
		MessageAttributes: make(map[string]types.MessageAttributeValue, len(w.Attrs)),
	}
	for _, a := range w.Attrs {
		in.MessageAttributes[a.Name] = types.MessageAttributeValue{DataType: strPtr(awswire.AttrType), StringValue: strPtr(a.Value)}
	}
	if strings.HasSuffix(topic, ".fifo") {
		group := env.Key
		if group == "" {
			group = env.Topic
		}
		in.MessageGroupId = strPtr(GroupID(group))
		in.MessageDeduplicationId = strPtr(env.ID)
	}
	return &entry{i: i, env: env, wire: w, input: in}, nil
}

func entrySize(e *entry) int { return e.wire.Size() }

// send makes one PublishBatch call and sets the result of each of its
// entries in errs.
func (p *Publisher) send(ctx context.Context, topic string, entries []*entry, errs []error) {
	if err := ctx.Err(); err != nil {
		for _, e := range entries {
			errs[e.i] = fmt.Errorf("outboxsns: topic %s: not sent: %v", topic, err)
		}
		return
	}
	in := &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: make([]types.PublishBatchRequestEntry, len(entries))}
	for n, e := range entries {
		in.PublishBatchRequestEntries[n] = e.input
	}
	var sent atomic.Bool
	out, err := p.client.PublishBatch(ctx, in, markSent(&sent))
	if err != nil {
		how, cerr := p.callError(ctx, "topic "+topic+": PublishBatch", err, sent.Load())
		if how == failMessages && len(entries) > 1 {
			// Refused for a reason no entry was given: one by one, to find
			// the message at fault.
			for _, e := range entries {
				p.send(ctx, topic, []*entry{e}, errs)
			}
			return
		}
		if how == failMessages {
			cerr = publisher.Permanent(cerr)
		}
		for _, e := range entries {
			errs[e.i] = cerr
		}
		return
	}
	byID := make(map[string]*entry, len(entries))
	for _, e := range entries {
		byID[*e.input.Id] = e
	}
	for _, s := range out.Successful {
		if e := byID[deref(s.Id)]; e != nil {
			errs[e.i] = nil
			delete(byID, deref(s.Id))
		}
	}
	for _, f := range out.Failed {
		if e := byID[deref(f.Id)]; e != nil {
			errs[e.i] = p.entryError(topic, deref(f.Code), deref(f.Message), f.SenderFault)
			delete(byID, deref(f.Id))
		}
	}
	for _, e := range byID {
		errs[e.i] = publisher.Unknown(fmt.Errorf("outboxsns: topic %s: PublishBatch answered nothing about message %s", topic, e.env.ID))
	}
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
	p.closed.Store(true)
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
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return fmt.Errorf("outboxsns: destination %q is not a topic ARN: a topic name has only letters, digits, '-' and '_' (and a .fifo suffix)", s)
		}
	}
	return nil
}

// GroupID is the MessageGroupId of a business key (the topic when the
// message has none) on a FIFO topic: the key itself when it is 1 to 128
// characters of letters, digits and ASCII punctuation; otherwise
// "sha256-" and the hex SHA-256 of the key, so that each key still has a
// group of its own. It is the same as outboxsqs.GroupID.
func GroupID(key string) string {
	ok := key != "" && len(key) <= maxGroupIDLen
	for i := 0; ok && i < len(key); i++ {
		ok = key[i] > ' ' && key[i] < 0x7f
	}
	if ok {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:])
}

func strPtr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
