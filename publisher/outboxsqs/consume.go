package outboxsqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/internal/awswire"
)

// ErrNoMessageID: an SQS message without a message-id attribute, so not
// one the relay published; it cannot be deduplicated.
var ErrNoMessageID = errors.New("outboxsqs: message has no message-id attribute")

// ConsumeOptions defaults.
const (
	// DefaultWaitTime is how long one ReceiveMessage waits for messages
	// (long polling, at most 20 s).
	DefaultWaitTime = 20 * time.Second
	// DefaultVisibilityTimeout is how long a received message stays
	// hidden from other consumers, renewed while its handler runs.
	DefaultVisibilityTimeout = 30 * time.Second
	// DefaultMaxMessages is how many messages one ReceiveMessage takes.
	DefaultMaxMessages = 10
)

// ConsumeOptions configures Consume. nil is valid.
type ConsumeOptions struct {
	// WaitTime is how long one ReceiveMessage waits for a message, up to
	// 20 s. Defaults to DefaultWaitTime (20 s).
	WaitTime time.Duration
	// VisibilityTimeout is how long received messages stay hidden; while
	// they wait for or run in the handler it is renewed every half of it
	// (ChangeMessageVisibilityBatch). A message whose handler failed
	// reappears when it runs out. Whole seconds, 1 s to 12 h. Defaults to
	// DefaultVisibilityTimeout (30 s).
	VisibilityTimeout time.Duration
	// MaxMessages is how many messages one ReceiveMessage takes, 1 to 10.
	// Defaults to DefaultMaxMessages (10).
	MaxMessages int
	// Logger receives handler failures and undecodable messages. Defaults
	// to slog.Default().
	Logger *slog.Logger
}

// Decode turns an SQS message the relay published into an inbox.Message:
// ID from the message-id attribute, Topic, Key and ContentType from the
// outbox-topic, outbox-business-key and content-type attributes, Headers
// from every String attribute (names in lower case) and the
// outbox-headers object, Payload from the body (base64-decoded when
// outbox-body-encoding says so). Receive with MessageAttributeNames
// ["All"].
//
// A CloudEvent (ce- attributes; or an application/cloudevents+json body)
// decodes into the same message: ID from ce-id, Topic from ce-type, Key
// from ce-subject. A message an SNS topic delivered to the queue without
// raw message delivery (the SNS JSON envelope in the body) is unwrapped
// first: its Message and MessageAttributes are read instead.
func Decode(msg types.Message) (*inbox.Message, error) {
	attrs := make(map[string]string, len(msg.MessageAttributes))
	for k, v := range msg.MessageAttributes {
		if v.StringValue != nil {
			attrs[k] = *v.StringValue
		}
	}
	body := aws.ToString(msg.Body)
	if _, ok := attrs[AttrMessageID]; !ok {
		if n, ok := snsNotification(body); ok {
			attrs, body = n.attrs(), n.Message
		}
	}
	headers, payload, err := awswire.Decode(attrs, body)
	if err != nil {
		return nil, fmt.Errorf("outboxsqs: message %s: %w", aws.ToString(msg.MessageId), err)
	}
	ce, err := Binding.DecodeEvent(headers, "", payload)
	if err != nil {
		return nil, fmt.Errorf("outboxsqs: message %s: not a valid CloudEvent: %w", aws.ToString(msg.MessageId), err)
	}
	if ce != nil {
		return inbox.FromCloudEvent(ce), nil
	}
	id := headers[AttrMessageID]
	if id == "" {
		return nil, fmt.Errorf("%w (SQS message %s)", ErrNoMessageID, aws.ToString(msg.MessageId))
	}
	return &inbox.Message{
		ID:          id,
		Topic:       headers[publisher.HeaderTopic],
		Key:         headers[publisher.HeaderBusinessKey],
		ContentType: headers[publisher.HeaderContentType],
		Headers:     headers,
		Payload:     payload,
	}, nil
}

// notification is the JSON envelope SNS puts around a message it
// delivers to a queue without raw message delivery.
type notification struct {
	Type              string
	TopicArn          string
	Message           string
	MessageAttributes map[string]struct{ Type, Value string }
}

func (n *notification) attrs() map[string]string {
	a := make(map[string]string, len(n.MessageAttributes))
	for k, v := range n.MessageAttributes {
		if strings.HasPrefix(v.Type, "String") {
			a[k] = v.Value
		}
	}
	return a
}

// snsNotification reads body as an SNS notification envelope.
func snsNotification(body string) (*notification, bool) {
	if !strings.HasPrefix(strings.TrimSpace(body), "{") {
		return nil, false
	}
	var n notification
	if json.Unmarshal([]byte(body), &n) != nil || n.Type != "Notification" || n.TopicArn == "" {
		return nil, false
	}
	return &n, true
}

// Consume receives messages from the queue at queueURL (long polling) and
// runs handler on each, one at a time in the order received, with ctx
// carrying the producer's trace. A nil from handler deletes the message;
// an error leaves it, so it reappears once its visibility timeout runs
// out (and, after the queue's maxReceiveCount, goes to its dead-letter
// queue when it has a redrive policy). On a FIFO queue the messages of
// the failed message's group that came in the same receive are left too,
// so the group's order holds. A message Decode rejects is logged and left
// alone for the redrive policy: it would fail the same way every time.
// Wrap handler with inbox.Handle to apply each message exactly once.
//
// Consume returns nil once ctx is done, or an error when the queue
// cannot be read (it does not exist, access is denied); other failures
// to receive are logged and retried.
func Consume(ctx context.Context, client *sqs.Client, queueURL string, handler func(ctx context.Context, m *inbox.Message) error, opts *ConsumeOptions) error {
	if client == nil || handler == nil || queueURL == "" {
		return errors.New("outboxsqs: Consume: nil client or handler, or no queue URL")
	}
	var o ConsumeOptions
	if opts != nil {
		o = *opts
	}
	if o.WaitTime == 0 {
		o.WaitTime = DefaultWaitTime
	}
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if o.MaxMessages == 0 {
		o.MaxMessages = DefaultMaxMessages
	}
	switch {
	case o.WaitTime < time.Second || o.WaitTime > 20*time.Second:
		return errors.New("outboxsqs: ConsumeOptions.WaitTime must be between 1s and 20s")
	case o.VisibilityTimeout < time.Second || o.VisibilityTimeout > 12*time.Hour:
		return errors.New("outboxsqs: ConsumeOptions.VisibilityTimeout must be between 1s and 12h")
	case o.MaxMessages < 1 || o.MaxMessages > 10:
		return errors.New("outboxsqs: ConsumeOptions.MaxMessages must be between 1 and 10")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &consumer{client: client, queue: queueURL, handler: handler, o: &o}
	backoff := time.Duration(0)
	for {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &queueURL,
			MaxNumberOfMessages:         int32(o.MaxMessages),
			WaitTimeSeconds:             int32(o.WaitTime / time.Second),
			VisibilityTimeout:           c.visibility(),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameMessageGroupId, types.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if missingQueue(err) || kindOfErr(err) == awswire.KindUnavailable {
				return fmt.Errorf("outboxsqs: consume %s: %w", queueURL, err)
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			o.Logger.Warn("outboxsqs: consume: receive failed; retrying", "queue", queueURL, "err", err, "wait", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if len(out.Messages) > 0 {
			c.handle(ctx, out.Messages)
		}
	}
}

// kindOfErr classifies an SDK error by its API error code.
func kindOfErr(err error) awswire.Kind {
	code := ""
	if ae := apiError(err); ae != nil {
		code = ae.ErrorCode()
	}
	return kindOf(code)
}

// consumer is the state of one Consume.
type consumer struct {
	client  *sqs.Client
	queue   string
	handler func(context.Context, *inbox.Message) error
	o       *ConsumeOptions
}

func (c *consumer) visibility() int32 {
	return int32((c.o.VisibilityTimeout + time.Second - 1) / time.Second)
}

// handle runs the handler on the messages of one receive, in order, while
// a heartbeat keeps the unsettled ones hidden.
func (c *consumer) handle(ctx context.Context, msgs []types.Message) {
	var mu sync.Mutex
	pending := make(map[int]types.Message, len(msgs))
	for i, m := range msgs {
		pending[i] = m
	}
	settle := func(i int) {
		mu.Lock()
		delete(pending, i)
		mu.Unlock()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(c.o.VisibilityTimeout / 2)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				var entries []types.ChangeMessageVisibilityBatchRequestEntry
				for i, m := range pending {
					entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{
						Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: c.visibility(),
					})
				}
				mu.Unlock()
				if len(entries) == 0 {
					continue
				}
				out, err := c.client.ChangeMessageVisibilityBatch(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &c.queue, Entries: entries})
				if err != nil {
					c.o.Logger.Warn("outboxsqs: consume: extending the visibility timeout failed; the messages may be received again", "queue", c.queue, "err", err)
				} else if len(out.Failed) > 0 {
					c.o.Logger.Warn("outboxsqs: consume: extending the visibility timeout failed for some messages", "queue", c.queue, "failed", len(out.Failed), "code", aws.ToString(out.Failed[0].Code))
				}
			}
		}
	}()
	defer func() { close(stop); <-done }()

	failedGroups := map[string]bool{}
	for i, raw := range msgs {
		if ctx.Err() != nil {
			return // the rest reappear after their visibility timeout
		}
		group := raw.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		if group != "" && failedGroups[group] {
			settle(i) // left for redelivery after the failed one
			continue
		}
		m, err := Decode(raw)
		if err != nil {
			c.o.Logger.Error("outboxsqs: consume: cannot decode; leaving the message to the queue's redrive policy", "queue", c.queue, "sqs_message_id", aws.ToString(raw.MessageId), "err", err)
			settle(i)
			if group != "" {
				failedGroups[group] = true
			}
			continue
		}
		err = c.handler(m.Context(ctx), m)
		settle(i)
		if err != nil {
			c.o.Logger.Warn("outboxsqs: consume: handler failed; the message reappears after its visibility timeout", "message_id", m.ID, "topic", m.Topic, "err", err)
			if group != "" {
				failedGroups[group] = true
			}
			continue
		}
		if _, err := c.client.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: &c.queue, ReceiptHandle: raw.ReceiptHandle}); err != nil {
			c.o.Logger.Warn("outboxsqs: consume: delete failed; the message may be received again", "message_id", m.ID, "err", err)
		}
	}
}
