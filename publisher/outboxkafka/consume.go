package outboxkafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Defaults of ConsumeOptions.
const (
	// DefaultRetryBackoff is the first wait before a record whose handler
	// failed is handled again; each further failure doubles it.
	DefaultRetryBackoff = 100 * time.Millisecond
	// DefaultMaxRetryBackoff caps the wait between handler retries.
	DefaultMaxRetryBackoff = 5 * time.Second
	// commitTimeout bounds the commit of handled records made after ctx
	// ended, so that work already done is not redelivered.
	commitTimeout = 10 * time.Second
)

// ErrNoMessageID: a record carries no message-id header, so it was not
// published by the outbox and cannot be deduplicated.
var ErrNoMessageID = errors.New("kafka: record has no message-id header")

// ConsumeOptions configures Consume. nil is valid.
type ConsumeOptions struct {
	// Logger receives handler failures, skipped records and commit
	// errors. Defaults to slog.Default().
	Logger *slog.Logger
	// RetryBackoff is the first wait before retrying a record whose
	// handler failed; it doubles per failure. Defaults to
	// DefaultRetryBackoff (100 ms).
	RetryBackoff time.Duration
	// MaxRetryBackoff caps that wait. Defaults to DefaultMaxRetryBackoff
	// (5 s).
	MaxRetryBackoff time.Duration
}

// Decode turns a record produced by this package's Publisher into an
// inbox.Message: the id from the message-id header, the topic from
// outbox-topic, the key from the record key, the content type from
// content-type, every header (names in lower case) and the value as the
// payload. A record without a message-id header is ErrNoMessageID.
//
// A CloudEvent (a route with format=cloudevents: ce_ headers; or an
// application/cloudevents+json value) decodes into the same message: the
// id from ce_id, the topic from ce_type, the key from the record key (else
// ce_subject), the content type from content-type (datacontenttype).
func Decode(r *kgo.Record) (*inbox.Message, error) {
	h := make(map[string]string, len(r.Headers))
	for _, x := range r.Headers {
		k := strings.ToLower(x.Key)
		if _, dup := h[k]; !dup { // the first of repeated headers wins
			h[k] = string(x.Value)
		}
	}
	if m, err := decodeEvent(r, h); m != nil || err != nil {
		return m, err
	}
	id := h[HeaderMessageID]
	if id == "" {
		return nil, fmt.Errorf("%w (topic %s, partition %d, offset %d)", ErrNoMessageID, r.Topic, r.Partition, r.Offset)
	}
	key := string(r.Key)
	if key == "" {
		key = h[publisher.HeaderBusinessKey]
	}
	return &inbox.Message{
		ID:          id,
		Topic:       h[publisher.HeaderTopic],
		Key:         key,
		ContentType: h[publisher.HeaderContentType],
		Headers:     h,
		Payload:     r.Value,
	}, nil
}

// decodeEvent decodes a record that is a CloudEvent; nil, nil when it is
// none.
func decodeEvent(r *kgo.Record, h map[string]string) (*inbox.Message, error) {
	m, err := outboxce.Kafka.DecodeEvent(h, "", r.Value)
	if m == nil && err == nil {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: record is not a valid CloudEvent (topic %s, partition %d, offset %d): %w", r.Topic, r.Partition, r.Offset, err)
	}
	if len(r.Key) > 0 {
		m.Key = string(r.Key)
		m.Headers[publisher.HeaderBusinessKey] = m.Key
	}
	return inbox.FromCloudEvent(m), nil
}

// Consume hands every record client fetches to handler, decoded, with
// ctx carrying the producer's trace, and commits a record's offset only
// after handler returned nil for it (and for every record before it in
// its partition). client is a consumer-group client built by the caller
// with kgo.ConsumerGroup, kgo.ConsumeTopics and kgo.DisableAutoCommit.
//
// When handler fails, Consume retries the same record in place, backing
// off from RetryBackoff to MaxRetryBackoff, until it succeeds or ctx
// ends: nothing later in the partition is handled or committed first, so
// each key's order is kept, and an uncommitted record is fetched again by
// whichever member owns the partition next. A record that cannot be
// decoded (no message-id header: not from the outbox) is logged, skipped
// and committed, since fetching it again cannot help.
//
// Partitions of one fetch are handled one after another. After each fetch
// Consume calls client.AllowRebalance, so kgo.BlockRebalanceOnPoll keeps
// partitions from moving while a fetch is handled. Delivery is at least
// once (a crash between handler and commit redelivers), so handlers
// dedupe by message id: use inbox.Handle.
//
// Consume returns nil when ctx is done, after committing what was
// handled, and an error when client is closed.
func Consume(ctx context.Context, client *kgo.Client, handler func(ctx context.Context, m *inbox.Message) error, opts *ConsumeOptions) error {
	if client == nil || handler == nil {
		return errors.New("kafka: Consume: nil client or handler")
	}
	var o ConsumeOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.MaxRetryBackoff <= 0 {
		o.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	for ctx.Err() == nil {
		fs := client.PollFetches(ctx)
		if fs.IsClientClosed() {
			return errors.New("kafka: Consume: client closed")
		}
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				o.Logger.Warn("kafka: fetch failed", "topic", topic, "partition", p, "err", err)
			}
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			var done []*kgo.Record
			for _, r := range p.Records {
				if !o.handle(ctx, r, handler) {
					break
				}
				done = append(done, r)
			}
			o.commit(ctx, client, done)
		})
		client.AllowRebalance()
	}
	return nil
}

// handle runs handler for r until it succeeds (true) or ctx ends (false).
func (o *ConsumeOptions) handle(ctx context.Context, r *kgo.Record, handler func(context.Context, *inbox.Message) error) bool {
	if ctx.Err() != nil {
		return false
	}
	m, err := Decode(r)
	if err != nil {
		o.Logger.Warn("kafka: skipping a record that is not an outbox message", "err", err)
		return true
	}
	wait := o.RetryBackoff
	for {
		err := handler(m.Context(ctx), m)
		if err == nil {
			return true
		}
		o.Logger.Warn("kafka: handler failed; retrying the record", "message_id", m.ID, "topic", r.Topic,
			"partition", r.Partition, "offset", r.Offset, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, o.MaxRetryBackoff)
	}
}

// commit commits handled records, even after ctx ended.
func (o *ConsumeOptions) commit(ctx context.Context, client *kgo.Client, done []*kgo.Record) {
	if len(done) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := client.CommitRecords(cctx, done...); err != nil {
		last := done[len(done)-1]
		o.Logger.Warn("kafka: commit failed; the records will be delivered again", "topic", last.Topic,
			"partition", last.Partition, "offset", last.Offset, "err", err)
	}
}
