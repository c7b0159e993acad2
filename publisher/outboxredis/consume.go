package outboxredis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
)

// Consume defaults.
const (
	// DefaultConsumeCount is how many entries one XREADGROUP reads.
	DefaultConsumeCount = 10
	// DefaultConsumeBlock is how long one XREADGROUP waits for new
	// entries, and so how long Consume may take to notice ctx ended.
	DefaultConsumeBlock = time.Second
	// DefaultRetryDelay is how long after a handler failure Consume reads
	// its pending entries again.
	DefaultRetryDelay = time.Second
)

var (
	// ErrNoGroup: the consumer group (or the stream) does not exist.
	// Create it (XGROUP CREATE <stream> <group> 0 MKSTREAM), or set
	// ConsumeOptions.CreateGroup.
	ErrNoGroup = errors.New("outboxredis: consumer group does not exist")
	// ErrNotOutboxEntry: a stream entry without a message_id, or whose
	// headers are not a JSON object of strings — not one the relay wrote,
	// or one deleted from the stream while pending.
	ErrNotOutboxEntry = errors.New("outboxredis: stream entry is not an outbox message")
)

// ConsumeOptions configures Consume. nil is valid.
type ConsumeOptions struct {
	// Count is how many entries one XREADGROUP reads. Defaults to
	// DefaultConsumeCount (10).
	Count int64
	// Block is how long one XREADGROUP waits for new entries; ctx is
	// checked between reads. Defaults to DefaultConsumeBlock (1 s).
	Block time.Duration
	// RetryDelay is how long after a handler failure Consume reads this
	// consumer's pending entries (XREADGROUP from 0) to run them again:
	// Redis does not redeliver by itself. Defaults to DefaultRetryDelay
	// (1 s).
	RetryDelay time.Duration
	// ClaimIdle, when above 0, makes Consume take over (XAUTOCLAIM) entries
	// that another consumer of the group read but did not ack for this
	// long — a consumer that crashed and never came back — every ClaimIdle.
	// Set it well above the longest handler run, or a slow consumer's
	// entries are run twice (the inbox still applies them once). Defaults
	// to 0: off, a consumer only retries its own pending entries.
	ClaimIdle time.Duration
	// CreateGroup creates the stream and the group (reading from the
	// start) when missing. Defaults to false: they are the operator's
	// resources and a missing group is ErrNoGroup.
	CreateGroup bool
	// Logger receives handler failures and undecodable entries. Defaults
	// to slog.Default().
	Logger *slog.Logger
}

// Decode turns an entry of stream written by the relay into an
// inbox.Message: ID from message_id, Topic from topic (the stream name
// when empty), Key from business_key, Payload from payload and Headers
// from the headers JSON, names in lower case; ContentType is the
// content-type header.
func Decode(stream string, x redis.XMessage) (*inbox.Message, error) {
	field := func(f string) string { s, _ := x.Values[f].(string); return s }
	id := field(FieldMessageID)
	if id == "" {
		return nil, fmt.Errorf("%w: entry %s of %q has no %s", ErrNotOutboxEntry, x.ID, stream, FieldMessageID)
	}
	var raw map[string]string
	if h := field(FieldHeaders); h != "" {
		if err := json.Unmarshal([]byte(h), &raw); err != nil {
			return nil, fmt.Errorf("%w: entry %s of %q: headers: %v", ErrNotOutboxEntry, x.ID, stream, err)
		}
	}
	headers := make(map[string]string, len(raw))
	for k, v := range raw {
		headers[strings.ToLower(k)] = v
	}
	topic := field(FieldTopic)
	if topic == "" {
		topic = stream
	}
	return &inbox.Message{
		ID:          id,
		Topic:       topic,
		Key:         field(FieldBusinessKey),
		ContentType: headers[publisher.HeaderContentType],
		Headers:     headers,
		Payload:     []byte(field(FieldPayload)),
	}, nil
}

// Consume reads stream as consumerName of group and runs handler on each
// entry, with ctx carrying the producer's trace. A nil from handler acks
// the entry (XACK); an error leaves it pending, and Consume runs it again
// RetryDelay later. It starts with this consumer's own pending entries,
// so what a crashed run read but did not ack is processed again: give
// each instance a stable consumerName. An entry Decode rejects is acked
// and logged, since it would fail the same way every time. Wrap handler
// with inbox.Handle to apply each message exactly once.
//
// Consume returns nil once ctx is done (within Block), ErrNoGroup when
// the group does not exist, or another error Redis answered.
func Consume(ctx context.Context, rdb redis.UniversalClient, stream, group, consumerName string, handler func(ctx context.Context, m *inbox.Message) error, opts *ConsumeOptions) error {
	c, err := newConsumer(rdb, stream, group, consumerName, handler, opts)
	if err != nil {
		return err
	}
	if c.o.CreateGroup {
		err := rdb.XGroupCreateMkStream(ctx, stream, group, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return c.fail(ctx, "XGROUP CREATE", err)
		}
	}
	return c.run(ctx)
}
