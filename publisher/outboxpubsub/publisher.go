package outboxpubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Config defaults.
const (
	// DefaultPublishTimeout bounds how long the client keeps trying to
	// send one bundle of messages, retries included.
	DefaultPublishTimeout = 30 * time.Second
	// DefaultThrottleDelay is how long the route is held after Pub/Sub
	// answered RESOURCE_EXHAUSTED without saying how long to wait.
	DefaultThrottleDelay = time.Second
)

// ErrClosed is returned for every message published after Close.
var ErrClosed = errors.New("outboxpubsub: publisher is closed")

// Config configures a Publisher. nil is valid.
type Config struct {
	// Topic is the topic every message is published to: a topic ID of
	// the client's project, or a full name projects/P/topics/T. Defaults
	// to "": each message goes to the topic its destination names (a
	// topic ID, or a full name), so that one publisher serves every
	// route of a project.
	Topic string
	// DisableOrdering publishes without ordering keys. Defaults to false:
	// a message with a business key carries it as its ordering key, and a
	// subscription with message ordering enabled delivers each key's
	// messages in order.
	DisableOrdering bool
	// PublishTimeout bounds how long the client keeps trying to send a
	// bundle, retries included (pubsub.PublishSettings.Timeout). A
	// Publish call that ends first reports its unconfirmed messages as
	// unknown outcomes; the client may still deliver them. Defaults to
	// DefaultPublishTimeout (30 s).
	PublishTimeout time.Duration
	// ThrottleDelay is how long the route is held after a
	// RESOURCE_EXHAUSTED answer that carries no retry delay of its own.
	// Defaults to DefaultThrottleDelay (1 s).
	ThrottleDelay time.Duration
	// CloseClient makes Close also close the client. Set it when the
	// client was made for this publisher alone, as OpenURL does.
	// Defaults to false: the client is the caller's.
	CloseClient bool
	// CloudEvents, when set, publishes every message as a CloudEvent in
	// binary content mode per the CloudEvents Pub/Sub binding (ce-
	// attributes, content-type; message-id stays). Defaults to nil, the
	// plain wire.
	CloudEvents *outboxce.Format
}

// Publisher publishes envelopes to Google Cloud Pub/Sub. It is safe for
// concurrent use.
type Publisher struct {
	client         *pubsub.Client
	topic          string // Config.Topic, "" for the envelope's destination
	ordering       bool
	publishTimeout time.Duration
	throttleDelay  time.Duration
	closeClient    bool
	ce             *outboxce.Format

	mu     sync.Mutex
	closed bool
	topics map[string]*pubsub.Publisher // full topic name → its publisher
}

var _ publisher.RunPublisher = (*Publisher)(nil)

// New returns a Publisher over client, a Pub/Sub client the caller made.
// Make it with the client configuration ClientConfig returns, so that
// throttling and an unreachable service reach the relay at once instead of
// being retried inside the client until the publish call gives up.
func New(client *pubsub.Client, cfg *Config) (*Publisher, error) {
	if client == nil {
		return nil, errors.New("outboxpubsub: nil client")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.PublishTimeout < 0 {
		return nil, errors.New("outboxpubsub: Config.PublishTimeout must not be negative")
	}
	if cfg.ThrottleDelay < 0 {
		return nil, errors.New("outboxpubsub: Config.ThrottleDelay must not be negative")
	}
	if cfg.Topic != "" {
		if _, err := topicName(client.Project(), cfg.Topic); err != nil {
			return nil, fmt.Errorf("outboxpubsub: Config.Topic: %v", err)
		}
	}
	if err := cfg.CloudEvents.Validate(); err != nil {
		return nil, fmt.Errorf("outboxpubsub: Config.CloudEvents: %v", err)
	}
	if cfg.CloudEvents.IsStructured() {
		return nil, errors.New("outboxpubsub: Config.CloudEvents: structured mode is for webhooks; use binary mode")
	}
	return &Publisher{
		client:         client,
		topic:          cfg.Topic,
		ordering:       !cfg.DisableOrdering,
		publishTimeout: orDefault(cfg.PublishTimeout, DefaultPublishTimeout),
		throttleDelay:  orDefault(cfg.ThrottleDelay, DefaultThrottleDelay),
		closeClient:    cfg.CloseClient,
		ce:             cfg.CloudEvents,
		topics:         map[string]*pubsub.Publisher{},
	}, nil
}

func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// ClientConfig returns the client configuration the relay wants: the
// Publish call is retried inside the client only on ABORTED, INTERNAL and
// UNKNOWN answers, briefly; RESOURCE_EXHAUSTED, UNAVAILABLE,
// DEADLINE_EXCEEDED and CANCELLED come back at once, so that the relay
// holds a throttled route, takes an unreachable one down, and retries a
// message of unknown outcome itself. The client's default retries those
// in the background for up to a minute. Pass it to
// pubsub.NewClientWithConfig; OpenURL does.
func ClientConfig() *pubsub.ClientConfig {
	return &pubsub.ClientConfig{TopicAdminCallOptions: &vkit.TopicAdminCallOptions{
		Publish: []gax.CallOption{gax.WithRetry(func() gax.Retryer {
			return gax.OnCodes([]codes.Code{codes.Aborted, codes.Internal, codes.Unknown}, gax.Backoff{
				Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2,
			})
		})},
	}}
}

// PublishesRuns reports whether a key's run of messages may be published
// in one call: true unless ordering is disabled. With ordering keys the
// client sends a key's messages one bundle at a time, in order, and once
// one fails it fails every later message of that key without sending it
// (it pauses the key); Publish resumes the key when the relay brings it
// again, retrying the failed message first.
func (p *Publisher) PublishesRuns() bool { return p.ordering }

// Publish publishes every envelope of the batch and waits for each
// result until ctx ends. Results are in batch order; nil only for a
// message Pub/Sub acknowledged with its message ID.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	results := make([]*pubsub.PublishResult, len(batch))
	resumed := map[*pubsub.Publisher]map[string]bool{}
	for i, env := range batch {
		if err := ctx.Err(); err != nil {
			errs[i] = fmt.Errorf("outboxpubsub: not sent: %w", err)
			continue
		}
		name, err := p.topicOf(env)
		if err != nil {
			errs[i] = publisher.Permanent(err)
			continue
		}
		msg, err := p.message(env, name)
		if err != nil {
			errs[i] = publisher.Permanent(err)
			continue
		}
		tp, err := p.publisherFor(name)
		if err != nil {
			errs[i] = err
			continue
		}
		if msg.OrderingKey != "" {
			// The relay brings a key again only to retry it: a key the
			// client paused after a failure starts again here, with the
			// message that failed, and not before.
			keys := resumed[tp]
			if keys == nil {
				keys = map[string]bool{}
				resumed[tp] = keys
			}
			if !keys[msg.OrderingKey] {
				keys[msg.OrderingKey] = true
				tp.ResumePublish(msg.OrderingKey)
			}
		}
		results[i] = tp.Publish(ctx, msg)
	}
	for i, r := range results {
		if r == nil {
			continue
		}
		if _, err := r.Get(ctx); err != nil {
			errs[i] = p.classify(ctx, batch[i], err)
		}
	}
	return errs
}

// topicOf returns the full name of the topic env goes to.
func (p *Publisher) topicOf(env *publisher.Envelope) (string, error) {
	if env == nil {
		return "", errors.New("outboxpubsub: nil envelope")
	}
	t := p.topic
	if t == "" {
		t = env.Destination
	}
	name, err := topicName(p.client.Project(), t)
	if err != nil {
		return "", fmt.Errorf("outboxpubsub: %v", err)
	}
	return name, nil
}

// publisherFor returns the client's publisher of a topic, made once.
func (p *Publisher) publisherFor(name string) (*pubsub.Publisher, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	tp := p.topics[name]
	if tp == nil {
		tp = p.client.Publisher(name)
		tp.EnableMessageOrdering = p.ordering
		tp.PublishSettings.Timeout = p.publishTimeout
		p.topics[name] = tp
	}
	return tp, nil
}

// Close makes later Publish calls fail, sends what the topics' publishers
// still hold and stops them, and with Config.CloseClient closes the
// client.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	topics := p.topics
	p.topics = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, tp := range topics {
		wg.Go(tp.Stop)
	}
	wg.Wait()
	if p.closeClient {
		if err := p.client.Close(); err != nil {
			return fmt.Errorf("outboxpubsub: close: %v", oneLine(err.Error()))
		}
	}
	return nil
}

// Topic ID rules: 3 to 255 characters, a letter first, then letters,
// digits and - _ . ~ + %, not starting with "goog".
func validTopicID(id string) error {
	switch {
	case len(id) < 3 || len(id) > 255:
		return fmt.Errorf("invalid topic ID %.60q: want 3 to 255 characters", id)
	case strings.HasPrefix(strings.ToLower(id), "goog"):
		return fmt.Errorf("invalid topic ID %q: IDs starting with goog are reserved", id)
	case !isLetter(id[0]):
		return fmt.Errorf("invalid topic ID %q: must start with a letter", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !isLetter(c) && (c < '0' || c > '9') && !strings.ContainsRune("-_.~+%", rune(c)) {
			return fmt.Errorf("invalid topic ID %q: only letters, digits and - _ . ~ + %% are allowed", id)
		}
	}
	return nil
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// topicName returns the full name of a topic ID of project, or of a full
// name projects/P/topics/T.
func topicName(project, t string) (string, error) {
	if t == "" {
		return "", errors.New("no topic: the message has no destination")
	}
	if strings.HasPrefix(t, "projects/") {
		parts := strings.Split(t, "/")
		if len(parts) != 4 || parts[1] == "" || parts[2] != "topics" {
			return "", fmt.Errorf("invalid topic name %q: want projects/PROJECT/topics/TOPIC", t)
		}
		if err := validTopicID(parts[3]); err != nil {
			return "", err
		}
		return t, nil
	}
	if err := validTopicID(t); err != nil {
		return "", err
	}
	return "projects/" + project + "/topics/" + t, nil
}
