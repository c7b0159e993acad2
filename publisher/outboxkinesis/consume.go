package outboxkinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/txoutbox/outbox/inbox"
)

// ConsumeClient is the part of *kinesis.Client Consume uses.
type ConsumeClient interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// Consume defaults.
const (
	// DefaultPollInterval is the wait after a GetRecords that returned
	// nothing; a shard serves 5 GetRecords calls per second.
	DefaultPollInterval = time.Second
	// DefaultRetryDelay is the wait before a record whose handler failed
	// is handed to it again.
	DefaultRetryDelay = time.Second
	// DefaultGetRecordsLimit is the most records one GetRecords returns.
	DefaultGetRecordsLimit = 1000
)

// ConsumeOptions configures Consume. nil is valid.
type ConsumeOptions struct {
	// From is where a shard without an entry in After starts:
	// types.ShardIteratorTypeTrimHorizon (the oldest record kept),
	// types.ShardIteratorTypeLatest or types.ShardIteratorTypeAtTimestamp
	// (with Timestamp). Defaults to TRIM_HORIZON.
	From types.ShardIteratorType
	// Timestamp is the start of From AT_TIMESTAMP.
	Timestamp time.Time
	// After maps a shard id to the sequence number of the last record
	// handled in it, as Checkpoint reported it: reading resumes after it.
	// Defaults to nil: every shard starts at From.
	After map[string]string
	// Checkpoint, when set, is called after the handler succeeded on a
	// record, with its shard and sequence number, for the caller to keep
	// (Consume keeps no checkpoint of its own). It is called from the
	// shard's goroutine; shards run concurrently. Defaults to nil.
	Checkpoint func(shardID, sequenceNumber string)
	// UntilCaughtUp makes Consume return nil once every shard is read to
	// its end (a GetRecords that returned nothing, 0 ms behind the tip),
	// instead of waiting for new records until ctx ends. Defaults to false.
	UntilCaughtUp bool
	// PollInterval is the wait after a GetRecords that returned nothing,
	// or that failed. Defaults to DefaultPollInterval (1 s).
	PollInterval time.Duration
	// RetryDelay is the wait before a record whose handler failed is
	// handed to it again. Defaults to DefaultRetryDelay (1 s).
	RetryDelay time.Duration
	// Limit is the most records one GetRecords returns (1 to 10,000).
	// Defaults to DefaultGetRecordsLimit (1,000).
	Limit int32
	// Logger receives handler failures, records that are not the
	// outbox's and read errors that are retried. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Consume reads every shard of a stream (a name, or an ARN starting with
// "arn:") and hands each record, decoded by Decode, to handler, with ctx
// carrying the producer's trace. It is a plain shard reader, not a
// Kinesis Client Library: one process reads every shard, with no lease
// and no checkpoint store (see ConsumeOptions.After and Checkpoint).
//
// A shard's records reach handler one at a time, in the shard's order,
// so a key's messages arrive in the order they were stored. A child shard
// (after a split or merge) is read once its parents are read to their
// end. When handler fails, the same record is handed to it again after
// RetryDelay, and the shard's later records wait: nothing is skipped
// while ctx lasts. A record Decode rejects (not published by the relay)
// is logged and skipped. Wrap handler with inbox.Handle to apply each
// message exactly once: a restart without After reads the stream again
// from From, and the inbox makes those redeliveries harmless.
//
// Consume returns nil once ctx is done (or, with UntilCaughtUp, once every
// shard is read), or an error when the stream cannot be read (missing,
// access denied).
func Consume(ctx context.Context, client ConsumeClient, stream string, handler func(ctx context.Context, m *inbox.Message) error, opts *ConsumeOptions) error {
	if client == nil || handler == nil {
		return errors.New("outboxkinesis: Consume: nil client or handler")
	}
	var o ConsumeOptions
	if opts != nil {
		o = *opts
	}
	if o.From == "" {
		o.From = types.ShardIteratorTypeTrimHorizon
	}
	switch o.From {
	case types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeLatest:
	case types.ShardIteratorTypeAtTimestamp:
		if o.Timestamp.IsZero() {
			return errors.New("outboxkinesis: Consume: From AT_TIMESTAMP needs a Timestamp")
		}
	default:
		return fmt.Errorf("outboxkinesis: Consume: From %q: want TRIM_HORIZON, LATEST or AT_TIMESTAMP (After resumes at a sequence number)", o.From)
	}
	if o.PollInterval < 0 || o.RetryDelay < 0 || o.Limit < 0 || o.Limit > 10000 {
		return errors.New("outboxkinesis: Consume: PollInterval and RetryDelay must not be negative, Limit must be 0 to 10000")
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.Limit == 0 {
		o.Limit = DefaultGetRecordsLimit
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &consumer{client: client, stream: stream, handler: handler, o: &o}
	shards, err := c.listShards(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return c.run(ctx, shards)
}

// consumer is the state of one Consume.
type consumer struct {
	client  ConsumeClient
	stream  string
	handler func(context.Context, *inbox.Message) error
	o       *ConsumeOptions
}

// shardState is a shard known to the consumer.
type shardState struct {
	parents []string
	running bool
	done    bool
}

// shardEnd is what a shard's reader reports when it stops.
type shardEnd struct {
	id       string
	children []string
	err      error
}

// run reads the shards, each once its parents are done, until they are
// all done or ctx ends.
func (c *consumer) run(ctx context.Context, shards []types.Shard) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	states := map[string]*shardState{}
	for _, s := range shards {
		states[aws.ToString(s.ShardId)] = &shardState{parents: parentsOf(s.ParentShardId, s.AdjacentParentShardId)}
	}
	ends := make(chan shardEnd)
	var wg sync.WaitGroup
	running := 0
	startReady := func() {
		for id, s := range states {
			if s.running || s.done {
				continue
			}
			ready := true
			for _, p := range s.parents {
				if ps, ok := states[p]; ok && !ps.done {
					ready = false // a parent no longer listed is past retention: read
				}
			}
			if !ready {
				continue
			}
			s.running = true
			running++
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				children, err := c.readShard(ctx, id)
				ends <- shardEnd{id: id, children: children, err: err}
			}(id)
		}
	}
	startReady()
	var failure error
	for running > 0 {
		e := <-ends
		running--
		s := states[e.id]
		s.running, s.done = false, true
		if e.err != nil && failure == nil && ctx.Err() == nil {
			failure = e.err
			cancel()
		}
		if ctx.Err() != nil {
			continue // draining
		}
		for _, ch := range e.children {
			if _, ok := states[ch]; !ok {
				states[ch] = &shardState{parents: []string{e.id}}
			}
		}
		startReady()
	}
	wg.Wait()
	return failure
}

func parentsOf(ids ...*string) []string {
	var out []string
	for _, id := range ids {
		if s := aws.ToString(id); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// streamRef sets the stream of a request: by ARN when it is one.
func streamRef(stream string) (name, arn *string) {
	if strings.HasPrefix(stream, "arn:") {
		return nil, aws.String(stream)
	}
	return aws.String(stream), nil
}

// listShards lists every shard of the stream, closed ones included.
func (c *consumer) listShards(ctx context.Context) ([]types.Shard, error) {
	var shards []types.Shard
	name, arn := streamRef(c.stream)
	in := &kinesis.ListShardsInput{StreamName: name, StreamARN: arn}
	for {
		out, err := c.client.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("outboxkinesis: stream %s: listing shards: %s", c.stream, oneLine(err.Error()))
		}
		shards = append(shards, out.Shards...)
		if aws.ToString(out.NextToken) == "" {
			return shards, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// iterator returns a shard iterator after the sequence number last, or
// at the consumer's starting position when last is "".
func (c *consumer) iterator(ctx context.Context, shard, last string) (*string, error) {
	name, arn := streamRef(c.stream)
	in := &kinesis.GetShardIteratorInput{StreamName: name, StreamARN: arn, ShardId: aws.String(shard)}
	switch {
	case last != "":
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.StartingSequenceNumber = aws.String(last)
	default:
		in.ShardIteratorType = c.o.From
		if c.o.From == types.ShardIteratorTypeAtTimestamp {
			in.Timestamp = aws.Time(c.o.Timestamp)
		}
	}
	out, err := c.client.GetShardIterator(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

// fatal reports whether a read error ends Consume: the stream is gone or
// may not be read.
func fatal(err error) bool {
	return is[*types.ResourceNotFoundException](err) || is[*types.AccessDeniedException](err) ||
		is[*types.InvalidArgumentException](err) || is[*types.KMSAccessDeniedException](err)
}

// readShard reads one shard to its end (it was closed by a split or a
// merge: the children are returned), until ctx ends, or with
// UntilCaughtUp until it is caught up.
func (c *consumer) readShard(ctx context.Context, shard string) ([]string, error) {
	last := c.o.After[shard]
	var it *string
	for ctx.Err() == nil {
		if it == nil {
			var err error
			if it, err = c.iterator(ctx, shard, last); err != nil {
				if ctx.Err() != nil {
					return nil, nil
				}
				if fatal(err) {
					return nil, fmt.Errorf("outboxkinesis: stream %s shard %s: %s", c.stream, shard, oneLine(err.Error()))
				}
				c.o.Logger.Warn("outboxkinesis: consume: cannot get a shard iterator; retrying", "stream", c.stream, "shard", shard, "err", err)
				c.sleep(ctx, c.o.PollInterval)
				continue
			}
			if it == nil { // a closed shard already read to its end
				return nil, nil
			}
		}
		out, err := c.client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(c.o.Limit)})
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil
			}
			if fatal(err) {
				return nil, fmt.Errorf("outboxkinesis: stream %s shard %s: %s", c.stream, shard, oneLine(err.Error()))
			}
			if !is[*types.ExpiredIteratorException](err) {
				c.o.Logger.Warn("outboxkinesis: consume: GetRecords failed; retrying", "stream", c.stream, "shard", shard, "err", err)
				c.sleep(ctx, c.o.PollInterval)
			}
			it = nil // a new iterator after the last record handled
			continue
		}
		for _, r := range out.Records {
			if !c.deliver(ctx, shard, r) {
				return nil, nil // ctx ended
			}
			last = aws.ToString(r.SequenceNumber)
		}
		if out.NextShardIterator == nil {
			children := make([]string, 0, len(out.ChildShards))
			for _, ch := range out.ChildShards {
				children = append(children, aws.ToString(ch.ShardId))
			}
			return children, nil
		}
		it = out.NextShardIterator
		if len(out.Records) == 0 {
			if c.o.UntilCaughtUp && aws.ToInt64(out.MillisBehindLatest) == 0 {
				return nil, nil
			}
			c.sleep(ctx, c.o.PollInterval)
		}
	}
	return nil, nil
}

// deliver hands one record to the handler until it succeeds; false when
// ctx ended first.
func (c *consumer) deliver(ctx context.Context, shard string, r types.Record) bool {
	m, err := Decode(r)
	if err != nil {
		c.o.Logger.Error("outboxkinesis: consume: not an outbox record; skipped", "stream", c.stream, "shard", shard, "sequence_number", aws.ToString(r.SequenceNumber), "err", err)
		return true
	}
	for {
		err := c.handler(m.Context(ctx), m)
		if err == nil {
			if c.o.Checkpoint != nil {
				c.o.Checkpoint(shard, aws.ToString(r.SequenceNumber))
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.o.Logger.Warn("outboxkinesis: consume: handler failed; handing the record again", "message_id", m.ID, "topic", m.Topic, "shard", shard, "retry_in", c.o.RetryDelay, "err", err)
		if !c.sleep(ctx, c.o.RetryDelay) {
			return false
		}
	}
}

// sleep waits d or until ctx ends; false when ctx ended.
func (c *consumer) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
