package outboxnats

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Config defaults.
const (
	// DefaultLookupTimeout bounds the stream lookup that explains a
	// "no responders" answer.
	DefaultLookupTimeout = 5 * time.Second
	// DefaultConnCheckInterval is how often a Publish waiting for PubAcks
	// checks that the connection is still up.
	DefaultConnCheckInterval = 100 * time.Millisecond
)

// ErrClosed is returned for every message published after Close.
var ErrClosed = errors.New("outboxnats: publisher is closed")

// Config configures a Publisher. The zero value (or nil) is valid.
type Config struct {
	// CloseConn makes Close also close the JetStream context's connection
	// (js.Conn()). Set it when the connection was opened for this
	// publisher alone, as outboxurl does. Defaults to false: the
	// connection is the caller's.
	CloseConn bool
	// LookupTimeout bounds the stream lookup made when the server answers
	// "no responders", which tells a subject no stream captures (a
	// permanent error) from a stream that did not answer in time (a
	// transient one). Defaults to DefaultLookupTimeout (5 s).
	LookupTimeout time.Duration
	// ConnCheckInterval is how often Publish, while waiting for PubAcks,
	// checks that the connection is still up; a message whose PubAck is
	// outstanding when it drops is an unknown outcome. Defaults to
	// DefaultConnCheckInterval (100 ms).
	ConnCheckInterval time.Duration
	// CloudEvents, when set, publishes every message as a CloudEvent in
	// binary content mode (NATS protocol binding: ce- headers,
	// percent-encoded, with ce-datacontenttype; Nats-Msg-Id stays), see
	// package outboxce. Defaults to nil, the plain wire.
	CloudEvents *outboxce.Format
}

// Publisher publishes envelopes to JetStream. It is safe for concurrent
// use.
type Publisher struct {
	js            jetstream.JetStream
	nc            *nats.Conn
	closeConn     bool
	lookupTimeout time.Duration
	checkEvery    time.Duration
	ce            *outboxce.Format // nil: the plain wire
	closed        atomic.Bool
}

var _ publisher.Publisher = (*Publisher)(nil)

// New returns a Publisher over js, a JetStream context the caller
// configured; its WithPublishAsyncMaxPending bounds the PubAcks in flight.
// The connection should reconnect by itself (nats.MaxReconnects(-1)) and,
// ideally, have no reconnect buffer (nats.ReconnectBufSize(-1)) so that a
// publish while disconnected fails at once as unavailable.
func New(js jetstream.JetStream, cfg *Config) (*Publisher, error) {
	if js == nil {
		return nil, errors.New("outboxnats: nil JetStream context")
	}
	nc := js.Conn()
	if nc == nil {
		return nil, errors.New("outboxnats: the JetStream context has no connection")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.LookupTimeout < 0 {
		return nil, errors.New("outboxnats: LookupTimeout must not be negative")
	}
	if cfg.ConnCheckInterval < 0 {
		return nil, errors.New("outboxnats: ConnCheckInterval must not be negative")
	}
	if err := cfg.CloudEvents.Validate(); err != nil {
		return nil, fmt.Errorf("outboxnats: Config.CloudEvents: %v", err)
	}
	if cfg.CloudEvents.IsStructured() {
		return nil, errors.New("outboxnats: Config.CloudEvents: structured mode is for webhooks; use binary mode")
	}
	return &Publisher{
		ce:            cfg.CloudEvents,
		js:            js,
		nc:            nc,
		closeConn:     cfg.CloseConn,
		lookupTimeout: orDefault(cfg.LookupTimeout, DefaultLookupTimeout),
		checkEvery:    orDefault(cfg.ConnCheckInterval, DefaultConnCheckInterval),
	}, nil
}

func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// Publish sends every envelope of the batch with PublishMsgAsync and waits
// for their PubAcks until ctx ends. Results are in batch order; nil only
// for a message JetStream acknowledged (a duplicate ack included).
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	if p.closed.Load() {
		for i := range errs {
			errs[i] = ErrClosed
		}
		return errs
	}
	futures := make([]jetstream.PubAckFuture, len(batch))
	pending := 0
	for i, env := range batch {
		msg, err := message(env, p.ce)
		if err != nil {
			errs[i] = publisher.Permanent(err)
			continue
		}
		if err := ctx.Err(); err != nil {
			errs[i] = fmt.Errorf("outboxnats: subject %q: not sent: %v", env.Destination, err)
			continue
		}
		if !p.nc.IsConnected() {
			errs[i] = p.notConnected(env.Destination)
			continue
		}
		f, err := p.send(ctx, msg)
		if err != nil {
			errs[i] = p.sendError(env, msg, err)
			continue
		}
		futures[i] = f
		pending++
	}
	if pending > 0 {
		p.await(ctx, batch, futures, errs)
	}
	return errs
}

// publishOpts turn off the client's own resend after "no responders": it
// fires on a timer and could land after Publish returned, behind a later
// message of the same key. The relay retries instead, in order.
var publishOpts = []jetstream.PublishOpt{jetstream.WithRetryAttempts(0)}

// send hands msg to the client. When the context's PubAcks in flight are
// at WithPublishAsyncMaxPending, the client gives up after a short stall
// without sending; send tries again until ctx ends.
func (p *Publisher) send(ctx context.Context, msg *nats.Msg) (jetstream.PubAckFuture, error) {
	for {
		f, err := p.js.PublishMsgAsync(msg, publishOpts...)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return f, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%v)", err, ctx.Err())
		}
	}
}

// await collects the PubAck or error of every future, in order, until ctx
// ends or the connection drops; what is still outstanding then is an
// unknown outcome.
func (p *Publisher) await(ctx context.Context, batch []*publisher.Envelope, futures []jetstream.PubAckFuture, errs []error) {
	w := waiter{p: p, ctx: ctx, tick: time.NewTicker(p.checkEvery), lookups: map[string]error{}}
	defer w.tick.Stop()
	for i, f := range futures {
		if f != nil {
			errs[i] = w.wait(batch[i], f)
		}
	}
}

// waiter is the state of one await.
type waiter struct {
	p       *Publisher
	ctx     context.Context
	tick    *time.Ticker
	lookups map[string]error // subject → classified "no responders" error
	lost    error            // why waiting stopped: ctx ended or the connection dropped
}

func (w *waiter) wait(env *publisher.Envelope, f jetstream.PubAckFuture) error {
	ok, failed := f.Ok(), f.Err()
	for w.lost == nil {
		select {
		case <-ok:
			return nil
		case err := <-failed:
			return w.p.ackError(w.ctx, env, err, w.lookups)
		case <-w.ctx.Done():
			w.lost = fmt.Errorf("publish ended: %w", w.ctx.Err())
		case <-w.tick.C:
			if st := w.p.nc.Status(); st != nats.CONNECTED {
				w.lost = fmt.Errorf("connection %s while the PubAck was awaited", statusText(st))
			}
		}
	}
	select { // take what already arrived
	case <-ok:
		return nil
	case err := <-failed:
		return w.p.ackError(w.ctx, env, err, w.lookups)
	default:
		return publisher.Unknown(fmt.Errorf("outboxnats: subject %q: no PubAck: %w", env.Destination, w.lost))
	}
}

// Close makes later Publish calls fail and, with Config.CloseConn, closes
// the connection. It does not touch a caller's connection.
func (p *Publisher) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	if p.closeConn {
		p.nc.Close()
	}
	return nil
}

// message builds the NATS message of env, or says why it cannot be sent.
func message(env *publisher.Envelope, ce *outboxce.Format) (*nats.Msg, error) {
	if env == nil {
		return nil, errors.New("outboxnats: nil envelope")
	}
	if err := validSubject(env.Destination); err != nil {
		return nil, err
	}
	if env.ID == "" {
		return nil, fmt.Errorf("outboxnats: subject %q: message has no id", env.Destination)
	}
	headers := env.Headers
	if ce != nil {
		var err error
		if headers, err = ce.Headers(outboxce.NATS, env); err != nil {
			return nil, fmt.Errorf("outboxnats: subject %q: %w", env.Destination, err)
		}
	}
	h := make(nats.Header, len(headers)+1)
	vals := make([]string, 0, len(headers)+1) // one allocation for every value slice
	for k, v := range headers {
		if err := validHeader(k, v); err != nil {
			return nil, fmt.Errorf("outboxnats: subject %q: %w", env.Destination, err)
		}
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	vals = append(vals, env.ID)
	h[jetstream.MsgIDHeader] = vals[len(vals)-1 : len(vals) : len(vals)]
	return &nats.Msg{Subject: env.Destination, Header: h, Data: env.Payload}, nil
}
