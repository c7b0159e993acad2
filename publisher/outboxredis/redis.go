// Package outboxredis is the Redis Streams destination: every message is
// appended with XADD to the stream named by its destination (the topic,
// unless the route names another).
//
// # URL
//
// The outbox command opens it from a URL (see outboxurl):
//
//	redis://[user:password@]host[:6379][/db][?param=value&…]
//	rediss://…   the same over TLS
//
// Parameters: maxlen=N (trim each stream to about N entries), create=true
// (let XADD create missing streams), wait=N (wait for N replicas before
// confirming), wait_timeout=DURATION, and the TLS parameters of outboxurl
// (tls, ca_file, cert_file, key_file, server_name). docs/brokers/redis.md
// describes each.
//
// # Wire format
//
// One stream entry per message, its fields in this order:
//
//	XADD <destination> NOMKSTREAM [MAXLEN ~ N] *
//	    message_id   <message id (UUID)>
//	    topic        <topic>
//	    business_key <business key, "" when none>
//	    payload      <body, byte for byte>
//	    headers      <one JSON object of string → string>
//
// headers holds every envelope header: outbox-topic, outbox-business-key
// (when the message has a key), content-type, traceparent (when the
// producer had a trace) and the producer's own headers. NOMKSTREAM is left
// out when Config.CreateStreams is set.
//
// # Results
//
// A message is confirmed by XADD's reply, the new entry's id: the entry is
// in the primary's memory (and in its append-only file as far as its
// appendfsync setting goes). With Config.WaitReplicas, confirmation also
// needs that many replicas to acknowledge the write (WAIT).
//
// A batch goes out as one pipeline (split only past
// Config.MaxPipelineBytes), so per-key order holds and there is one round
// trip per batch. Errors are classified for the relay:
//
//   - missing stream (without CreateStreams), a key that is not a stream
//     (WRONGTYPE), a key the Redis user may not write (NOPERM), an empty
//     stream name: permanent, the message goes dead with the reason;
//   - the server cannot be reached (connection refused, dial timeout, DNS,
//     TLS handshake, authentication, connection pool timeout): unavailable,
//     the route goes down without counting attempts;
//   - no reply after the pipeline went out (timeout, connection lost):
//     unknown, retried, the entry may be in the stream already;
//   - OOM, LOADING, BUSY, READONLY, CLUSTERDOWN, MASTERDOWN, NOREPLICAS
//     and MISCONF (the server refuses every write for a while):
//     unavailable, the route goes down and is probed;
//   - TRYAGAIN, MOVED, ASK and other server errors: transient, retried
//     with backoff (and the route goes down if every new message meets
//     them).
//
// # Consuming
//
// Consume reads a stream as one consumer of a group and hands each entry,
// decoded by Decode, to a handler as an *inbox.Message: XACK when the
// handler returns nil, left pending and run again when it fails. It
// starts with the consumer's own pending entries and can take over a dead
// consumer's (ConsumeOptions.ClaimIdle). Wrap the handler with
// inbox.Handle to apply each message exactly once.
package outboxredis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/publisher"
)

// Stream entry field names (CONTRACT §4).
const (
	FieldMessageID   = "message_id"
	FieldTopic       = "topic"
	FieldBusinessKey = "business_key"
	FieldPayload     = "payload"
	FieldHeaders     = "headers"
)

// Config defaults.
const (
	// DefaultWaitTimeout bounds WAIT when Config.WaitReplicas is set.
	DefaultWaitTimeout = time.Second
	// DefaultMaxPipelineBytes is about the most message bytes one pipeline
	// carries; a larger batch goes out in several pipelines, one after the
	// other.
	DefaultMaxPipelineBytes = 16 << 20
)

// ErrClosed is returned for every message published after Close.
var ErrClosed = errors.New("outboxredis: publisher is closed")

// Config configures a Publisher. The zero value (or nil) is valid.
type Config struct {
	// MaxLen, when above 0, trims each stream written to about this many
	// entries (XADD MAXLEN ~ N): Redis trims whole internal nodes, so a
	// stream may hold somewhat more. Defaults to 0, no trimming.
	MaxLen int64
	// CreateStreams lets XADD create a stream that does not exist. Off, a
	// missing stream is a permanent error (XADD NOMKSTREAM), since broker
	// resources belong to the operator. Defaults to false.
	CreateStreams bool
	// WaitReplicas, when above 0, holds confirmation until this many
	// replicas acknowledged the batch's writes (WAIT N). Fewer within
	// WaitTimeout is an unknown outcome: the entries are on the primary
	// and will be written again. Needs a *redis.Client (standalone or
	// Sentinel failover), not a cluster or ring client. Defaults to 0.
	WaitReplicas int
	// WaitTimeout bounds WAIT. The client's ReadTimeout must be longer.
	// Defaults to DefaultWaitTimeout (1 s).
	WaitTimeout time.Duration
	// MaxPipelineBytes is about the most message bytes one pipeline
	// carries; a batch beyond it goes out in several pipelines, in order.
	// Defaults to DefaultMaxPipelineBytes (16 MiB).
	MaxPipelineBytes int
	// CloseClient makes Close close the client too. Defaults to false: the
	// client is the caller's.
	CloseClient bool
}

func (c *Config) validate() error {
	switch {
	case c.MaxLen < 0:
		return errors.New("outboxredis: Config.MaxLen must not be negative")
	case c.WaitReplicas < 0:
		return errors.New("outboxredis: Config.WaitReplicas must not be negative")
	case c.WaitTimeout < 0:
		return errors.New("outboxredis: Config.WaitTimeout must not be negative")
	case c.WaitTimeout > 0 && c.WaitTimeout < time.Millisecond:
		return errors.New("outboxredis: Config.WaitTimeout must be at least 1ms")
	case c.MaxPipelineBytes < 0:
		return errors.New("outboxredis: Config.MaxPipelineBytes must not be negative")
	}
	return nil
}

// Publisher appends messages to Redis streams. It is safe for concurrent
// use.
type Publisher struct {
	client redis.UniversalClient
	cfg    Config

	mu     sync.RWMutex // held for reading by Publish, for writing by Close
	closed bool
}

var _ publisher.Publisher = (*Publisher)(nil)

// New returns a Publisher over client, which the caller configured
// (address, credentials, TLS, timeouts). Set ContextTimeoutEnabled on it so
// the relay's publish deadline bounds every round trip; otherwise the
// client's own Read/WriteTimeout do.
func New(client redis.UniversalClient, cfg *Config) (*Publisher, error) {
	if client == nil {
		return nil, errors.New("outboxredis: nil client")
	}
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.WaitReplicas > 0 {
		if _, ok := client.(*redis.Client); !ok {
			return nil, fmt.Errorf("outboxredis: Config.WaitReplicas needs a *redis.Client (standalone or failover), not %T: WAIT must follow the writes on their connection", client)
		}
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	if c.MaxPipelineBytes == 0 {
		c.MaxPipelineBytes = DefaultMaxPipelineBytes
	}
	return &Publisher{client: client, cfg: c}, nil
}

// Client returns the client the publisher writes with.
func (p *Publisher) Client() redis.UniversalClient { return p.client }

// Close makes later Publish calls fail with ErrClosed, after waiting for
// those in flight. It closes the client only with Config.CloseClient.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	if p.cfg.CloseClient {
		if err := p.client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			return fmt.Errorf("outboxredis: close client: %w", err)
		}
	}
	return nil
}

// entry is one message ready to go.
type entry struct {
	i    int // index in the batch
	args *redis.XAddArgs
	size int
}

// Publish appends every envelope of the batch to its stream in one
// pipeline and returns the results in batch order; nil means XADD
// answered with the entry's id (and, with WaitReplicas, enough replicas
// acknowledged it).
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		for i := range errs {
			errs[i] = ErrClosed
		}
		return errs
	}
	entries := make([]entry, 0, len(batch))
	for i, env := range batch {
		e, err := p.entry(env)
		if err != nil {
			errs[i] = err
			continue
		}
		e.i = i
		entries = append(entries, e)
	}
	for start := 0; start < len(entries); {
		end, size := start, 0
		for end < len(entries) && (end == start || size+entries[end].size <= p.cfg.MaxPipelineBytes) {
			size += entries[end].size
			end++
		}
		chunk := entries[start:end]
		start = end
		if err := ctx.Err(); err != nil {
			notSent(errs, chunk, fmt.Errorf("outboxredis: not sent: %w", err))
			notSent(errs, entries[start:], fmt.Errorf("outboxredis: not sent: %w", err))
			break
		}
		if stop := p.send(ctx, chunk, errs); stop != nil {
			// The connection failed: later pipelines would fail the same
			// way. Nothing of them was sent, so they are not unknown.
			var rest error = fmt.Errorf("outboxredis: not sent after an earlier pipeline of the batch failed: %v", stop)
			if publisher.Classify(stop) == publisher.ClassUnavailable {
				rest = publisher.Unavailable(rest)
			}
			notSent(errs, entries[start:], rest)
			break
		}
	}
	return errs
}

func notSent(errs []error, entries []entry, err error) {
	for _, e := range entries {
		errs[e.i] = err
	}
}

// entry renders one envelope as XADD arguments; a message that cannot be
// sent is a permanent error.
func (p *Publisher) entry(env *publisher.Envelope) (entry, error) {
	if env == nil {
		return entry{}, publisher.Permanent(errors.New("outboxredis: nil envelope"))
	}
	if env.Destination == "" {
		return entry{}, publisher.Permanent(fmt.Errorf("outboxredis: message %s: empty stream name", env.ID))
	}
	headers, err := headersJSON(env)
	if err != nil {
		return entry{}, publisher.Permanent(fmt.Errorf("outboxredis: message %s: headers: %v", env.ID, err))
	}
	args := &redis.XAddArgs{
		Stream:     env.Destination,
		NoMkStream: !p.cfg.CreateStreams,
		MaxLen:     p.cfg.MaxLen,
		Approx:     p.cfg.MaxLen > 0,
		ID:         "*",
		Values: []any{
			FieldMessageID, env.ID,
			FieldTopic, env.Topic,
			FieldBusinessKey, env.Key,
			FieldPayload, env.Payload,
			FieldHeaders, headers,
		},
	}
	size := len(env.Destination) + len(env.ID) + len(env.Topic) + len(env.Key) + len(env.Payload) + len(headers) + 128
	return entry{args: args, size: size}, nil
}

// headersJSON renders the envelope's headers, adding the contract's own
// when the envelope lacks them.
func headersJSON(env *publisher.Envelope) ([]byte, error) {
	h := make(map[string]string, len(env.Headers)+3)
	for k, v := range env.Headers {
		h[k] = v
	}
	if _, ok := h[publisher.HeaderTopic]; !ok {
		h[publisher.HeaderTopic] = env.Topic
	}
	if _, ok := h[publisher.HeaderBusinessKey]; !ok && env.Key != "" {
		h[publisher.HeaderBusinessKey] = env.Key
	}
	if h[publisher.HeaderContentType] == "" {
		h[publisher.HeaderContentType] = publisher.DefaultContentType
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(h); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// send runs one pipeline and records a result per entry. It returns the
// error that stops the rest of the batch: a connection failure.
func (p *Publisher) send(ctx context.Context, chunk []entry, errs []error) error {
	var wait *redis.Cmd
	cmds, pipeErr := p.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, e := range chunk {
			pipe.XAdd(ctx, e.args)
		}
		if p.cfg.WaitReplicas > 0 {
			wait = pipe.Do(ctx, "WAIT", p.cfg.WaitReplicas, p.cfg.WaitTimeout.Milliseconds())
		}
		return nil
	})
	want := len(chunk)
	if wait != nil {
		want++
	}
	if len(cmds) != want {
		err := publisher.Unknown(fmt.Errorf("outboxredis: pipeline returned %d replies for %d commands", len(cmds), want))
		notSent(errs, chunk, err)
		return err
	}
	var waitErr error
	if wait != nil {
		switch n, err := wait.Int64(); {
		case err != nil:
			waitErr = fmt.Errorf("WAIT %d failed: %w", p.cfg.WaitReplicas, err)
		case n < int64(p.cfg.WaitReplicas):
			waitErr = fmt.Errorf("only %d of %d replicas acknowledged it within %s", n, p.cfg.WaitReplicas, p.cfg.WaitTimeout)
		}
	}
	var stop error
	for k, e := range chunk {
		cmd, ok := cmds[k].(*redis.StringCmd)
		if !ok {
			errs[e.i] = publisher.Unknown(fmt.Errorf("outboxredis: XADD %q: unexpected reply type %T", e.args.Stream, cmds[k]))
			continue
		}
		id, err := cmd.Result()
		if err == nil && id == "" && pipeErr != nil {
			// go-redis leaves the commands blank when the connection's
			// handshake is refused with a server error (WRONGPASS,
			// NOAUTH, max clients): the pipeline's error is theirs.
			err = pipeErr
		}
		switch {
		case err != nil:
			errs[e.i] = classify(ctx, err, e.args.Stream)
			if !isServerReply(err) {
				stop = errs[e.i]
			}
		case id == "":
			errs[e.i] = publisher.Unknown(fmt.Errorf("outboxredis: XADD %q: empty reply", e.args.Stream))
		case waitErr != nil:
			errs[e.i] = publisher.Unknown(fmt.Errorf("outboxredis: XADD %q wrote entry %s on the primary, but %w", e.args.Stream, id, waitErr))
		}
	}
	return stop
}
