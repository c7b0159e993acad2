// Package outboxkafka is the kafka:// destination: it produces every
// message as a Kafka record through a franz-go client (kgo), with acks=all
// and the idempotent producer, and reports a message delivered only once
// the partition leader confirmed that every in-sync replica has it.
//
// # URL
//
//	kafka://host:9092[,host2:9092…][?client_id=…&tls=true&ca_file=…&sasl=scram-sha-512]
//
// opened by outboxurl.Open (see docs/brokers/kafka.md for every
// parameter). In Go, wrap a client you configured with New, or let Dial
// build one.
//
// # Wire format
//
// One record per message:
//
//	topic    the envelope's destination (the message topic unless the route names another)
//	key      the business key; no key (null) when the message has none
//	value    the payload, byte for byte (an empty payload is an empty value, never null)
//	headers  message-id: <message id>, first; then, sorted by name, the
//	         message's headers: content-type, outbox-topic,
//	         outbox-business-key (when set), traceparent (when the
//	         producer had a trace) and the producer's own
//
// Records with the same key land in the same partition (the client's
// default partitioner hashes the key), so a consumer sees each key's
// messages in order. Consumers dedupe on the message-id header.
//
// With Config.CloudEvents (format=cloudevents in the URL) every record is
// a CloudEvent in binary content mode instead, per the CloudEvents Kafka
// binding: headers ce_specversion, ce_id, ce_source, ce_type, ce_time,
// ce_subject and ce_partitionkey (the business key, also the record key),
// content-type, the plain traceparent and the producer's own; no
// message-id or outbox-* headers. See package outboxce.
//
// # Results
//
// A missing topic, a record too large for the broker or the client, a
// destination that is not a legal Kafka topic name and a topic the
// credentials may not write to are permanent: the message goes dead with
// the reason. When no broker can be used (connections refused, the
// brokers' certificate not trusted, the credentials rejected) the result
// is publisher.Unavailable, so the relay takes the route down without spending
// attempts; the Publisher then checks that a broker answers before
// producing again. A publish that ends before the broker answered is an
// unknown outcome (the record may still be written). Everything else
// (leader changes, throttling, a topic recreated under a new id) is
// retried, by the client first and then by the relay.
package outboxkafka

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// HeaderMessageID is the record header that carries the message id.
const HeaderMessageID = "message-id"

// Defaults of Config and of the client Dial builds.
const (
	// DefaultProbeTimeout bounds the check that a broker answers, made
	// before publishing when the previous publish found none.
	DefaultProbeTimeout = 5 * time.Second
	// DefaultClientID is the client id Dial's client sends.
	DefaultClientID = "outbox-relay"
	// DefaultMaxBufferedRecords bounds the records Dial's client holds
	// unconfirmed; Publish blocks (within its context) beyond it.
	DefaultMaxBufferedRecords = 10000
	// DefaultUnknownTopicRetries is how many metadata refreshes Dial's
	// client makes for a topic the brokers do not know before failing its
	// records.
	DefaultUnknownTopicRetries = 1
	// DefaultRecordDeliveryTimeout is how long Dial's client keeps trying
	// to produce a record that was never written; below the relay's
	// default publish timeout (15 s) so that such records come back with
	// their cause instead of a bare deadline.
	DefaultRecordDeliveryTimeout = 10 * time.Second
	// DefaultProduceRequestTimeout is how long brokers may take to answer
	// one produce request of Dial's client.
	DefaultProduceRequestTimeout = 5 * time.Second
	// DefaultDialTimeout bounds a connection attempt of Dial's client.
	DefaultDialTimeout = 5 * time.Second
	// DefaultMetadataMinAge is the least time between two metadata
	// requests of Dial's client, so that a missing topic is confirmed
	// missing within about a second.
	DefaultMetadataMinAge = 500 * time.Millisecond
)

// Config configures a Publisher. The zero value (or nil) is valid.
type Config struct {
	// ProbeTimeout bounds the check, made before producing, that some
	// broker answers, when the previous publish could reach none. Defaults
	// to DefaultProbeTimeout (5 s).
	ProbeTimeout time.Duration
	// AutoCreateTopics lets the client ask brokers to create missing
	// topics (kgo.AllowAutoTopicCreation; the brokers must allow it too).
	// Dial sets the option; New accepts a client that has it only when
	// this is true. Topics belong to the operator, so this defaults to
	// false: a missing topic is a permanent error.
	AutoCreateTopics bool
	// CloudEvents, when set, produces every message as a CloudEvent in
	// binary content mode (Kafka protocol binding: ce_ headers,
	// content-type, the business key as the record key and the
	// partitionkey attribute), see package outboxce. Defaults to nil, the
	// plain wire.
	CloudEvents *outboxce.Format
}

// Publisher produces messages to Kafka. It is safe for concurrent use.
type Publisher struct {
	client       *kgo.Client
	own          bool // Close closes the client
	probeTimeout time.Duration
	ce           *outboxce.Format // nil: the plain wire
	// suspect is set when a publish found no broker (or heard nothing
	// back at all); the next Publish checks that a broker answers before
	// producing.
	suspect atomic.Bool
	closed  atomic.Bool

	// manual: the client flushes only when told (kgo.ManualFlushing), and
	// the Publisher publishes key runs (see runs.go).
	manual bool
	runs   *runs // nil unless manual
}

var _ publisher.RunPublisher = (*Publisher)(nil)

// New returns a Publisher over client, which the caller configured and
// keeps: Close leaves it open. The client must produce durably and keep
// per-key order, so New refuses one that
//
//   - does not require acks from all in-sync replicas (kgo's default is
//     kgo.RequiredAcks(kgo.AllISRAcks()); keep it),
//   - disabled the idempotent producer (kgo.DisableIdempotentWrite) or
//     allows cancelling in-flight idempotent records
//     (kgo.AllowIdempotentProduceCancellation),
//   - is transactional (kgo.TransactionalID),
//   - asks brokers to create topics (kgo.AllowAutoTopicCreation), unless
//     Config.AutoCreateTopics says so.
//
// A client with kgo.ManualFlushing (as Dial builds) is flushed by the
// Publisher, which then publishes a key's run of messages in one call
// (publisher.RunPublisher): a flush carries at most one batch per topic
// and partition and is answered before the next is buffered, so that no
// record is written behind one that failed (a run longer than a batch
// takes a flush per batch). Without it, the relay gives the Publisher one message per key
// per call.
//
// Recommended, as Dial does: kgo.UnknownTopicRetries(1) and
// kgo.MetadataMinAge(500*time.Millisecond) so that a missing topic fails
// fast, and kgo.RecordDeliveryTimeout below the relay's PublishTimeout so
// that a record that cannot be written comes back with its cause. Keep the
// default partitioner, or one that maps equal keys to one partition.
func New(client *kgo.Client, cfg *Config) (*Publisher, error) {
	return newPublisher(client, cfg, nil)
}

// newPublisher is New; lim is the limits client's batches are capped by
// (Dial's client), nil for a client with a fixed limit.
func newPublisher(client *kgo.Client, cfg *Config, lim *limits) (*Publisher, error) {
	if client == nil {
		return nil, errors.New("outboxkafka: nil client")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.ProbeTimeout < 0 {
		return nil, errors.New("outboxkafka: Config.ProbeTimeout must not be negative")
	}
	if err := checkClient(client, cfg); err != nil {
		return nil, err
	}
	if err := cfg.CloudEvents.Validate(); err != nil {
		return nil, fmt.Errorf("outboxkafka: Config.CloudEvents: %v", err)
	}
	if cfg.CloudEvents.IsStructured() {
		return nil, errors.New("outboxkafka: Config.CloudEvents: structured mode is for webhooks; use binary mode")
	}
	p := &Publisher{client: client, probeTimeout: cfg.ProbeTimeout, ce: cfg.CloudEvents}
	if p.probeTimeout == 0 {
		p.probeTimeout = DefaultProbeTimeout
	}
	if on, _ := client.OptValue(kgo.ManualFlushing).(bool); on {
		p.manual = true
		p.runs = newRuns(client, lim)
	}
	return p, nil
}

// checkClient refuses a client whose settings break the delivery promise.
func checkClient(cl *kgo.Client, cfg *Config) error {
	if acks, _ := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); acks != kgo.AllISRAcks() {
		return errors.New("outboxkafka: the client must require acks from all in-sync replicas: use kgo.RequiredAcks(kgo.AllISRAcks())")
	}
	if on, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); on {
		return errors.New("outboxkafka: the client must use the idempotent producer: drop kgo.DisableIdempotentWrite")
	}
	if on, _ := cl.OptValue(kgo.AllowIdempotentProduceCancellation).(bool); on {
		return errors.New("outboxkafka: the client must not cancel in-flight records: drop kgo.AllowIdempotentProduceCancellation")
	}
	if id, _ := cl.OptValue(kgo.TransactionalID).(string); id != "" {
		return errors.New("outboxkafka: the client must not be transactional: drop kgo.TransactionalID")
	}
	if on, _ := cl.OptValue(kgo.AllowAutoTopicCreation).(bool); on && !cfg.AutoCreateTopics {
		return errors.New("outboxkafka: the client asks brokers to create topics (kgo.AllowAutoTopicCreation): set Config.AutoCreateTopics to mean it")
	}
	return nil
}

// Dial builds a client for the seed brokers and returns a Publisher that
// owns it: Close closes it. The client requires acks from all in-sync
// replicas, produces idempotently, is flushed by the Publisher
// (kgo.ManualFlushing: key runs in one call, see New), caps a topic's
// batches at the topic's max.message.bytes (read from the brokers before
// the first record to the topic; 1,000,012 bytes when they do not say),
// buffers at most DefaultMaxBufferedRecords records, fails a missing topic
// after DefaultUnknownTopicRetries metadata refreshes and a record it could
// not write after DefaultRecordDeliveryTimeout, and sends DefaultClientID.
// opts come after these and override them (kgo.DialTLSConfig, kgo.SASL,
// kgo.ClientID…; kgo.ProducerLinger is for clients that flush by
// themselves); the result must still pass New's checks. No connection is
// made until the first publish.
func Dial(seeds []string, cfg *Config, opts ...kgo.Opt) (*Publisher, error) {
	if len(seeds) == 0 {
		return nil, errors.New("outboxkafka: no seed brokers")
	}
	for _, s := range seeds {
		if s == "" {
			return nil, errors.New("outboxkafka: empty seed broker address")
		}
	}
	if cfg == nil {
		cfg = &Config{}
	}
	lim := &limits{}
	all := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(DefaultClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ManualFlushing(),
		kgo.ProducerBatchMaxBytesFn(lim.batchMax),
		kgo.MaxBufferedRecords(DefaultMaxBufferedRecords),
		kgo.UnknownTopicRetries(DefaultUnknownTopicRetries),
		kgo.RecordDeliveryTimeout(DefaultRecordDeliveryTimeout),
		kgo.ProduceRequestTimeout(DefaultProduceRequestTimeout),
		kgo.DialTimeout(DefaultDialTimeout),
		kgo.MetadataMinAge(DefaultMetadataMinAge),
	}
	if cfg.AutoCreateTopics {
		all = append(all, kgo.AllowAutoTopicCreation())
	}
	all = append(all, opts...)
	client, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("outboxkafka: %w", err)
	}
	p, err := newPublisher(client, cfg, lim)
	if err != nil {
		client.Close()
		return nil, err
	}
	p.own = true
	return p, nil
}

// Client returns the underlying client.
func (p *Publisher) Client() *kgo.Client { return p.client }

// Publish produces every envelope of the batch at once, through the
// client's asynchronous Produce, and waits for the broker's answers or for
// ctx to end. Results are in batch order; nil means the record is written
// to all in-sync replicas. A record still unanswered when ctx ends is an
// unknown outcome: it may yet be written.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	if err := p.ready(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	// Buffered for the whole batch: promises run serially on the client's
	// promise goroutine and must never block, even after Publish returned.
	results := make(chan result, len(batch))
	a := answers{batch: batch, errs: errs, answered: make([]bool, len(batch))}
	if p.manual {
		p.runs.publish(ctx, p, &a, results)
	} else {
		a.waiting = p.produce(ctx, batch, errs, results)
		if gone := p.await(ctx, &a, results); a.waiting > 0 {
			a.unanswered(ctx, gone)
		}
	}
	p.purgeRecreated(batch, errs)
	if a.doubt {
		p.suspect.Store(true)
	}
	return errs
}

// ready is why no batch can be sent now: the Publisher is closed, ctx
// ended, or no broker answers the check that follows a batch whose
// brokers seemed gone. nil when one can.
func (p *Publisher) ready(ctx context.Context) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka: not sent: %w", err)
	}
	if p.suspect.Load() {
		if err := p.probe(ctx); err != nil {
			return err
		}
		p.suspect.Store(false)
	}
	return nil
}

// produce hands the batch to a client that flushes by itself, whose
// answers come on results, and returns how many records it handed over;
// an envelope that cannot be a record gets its permanent error in errs.
func (p *Publisher) produce(ctx context.Context, batch []*publisher.Envelope, errs []error, results chan<- result) (waiting int) {
	for i, env := range batch {
		rec, err := newRecord(env, p.ce)
		if err != nil {
			errs[i] = publisher.Permanent(err)
			continue
		}
		waiting++
		p.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { results <- result{i, err} })
	}
	return waiting
}

// answers are a batch's records as Publish waits for the broker.
type answers struct {
	batch    []*publisher.Envelope
	errs     []error
	answered []bool
	// waiting is how many records have no answer yet, confirmed how many
	// were written.
	waiting, confirmed int
	// doubt: no broker seems to answer; the next Publish checks first.
	doubt bool
}

// take records a record's answer.
func (a *answers) take(p *Publisher, r result) {
	a.answered[r.i] = true
	a.waiting--
	if r.err == nil {
		a.confirmed++
		return
	}
	a.errs[r.i] = p.classify(a.batch[r.i], r.err)
	if publisher.Classify(a.errs[r.i]) == publisher.ClassUnavailable {
		a.doubt = true
	}
}

// await takes the answers until every record has one, ctx ends, or no
// broker answers any more, which it returns: the client retries a record
// whose broker is gone until ctx ends, so while answers are missing it
// checks now and then that some broker still answers, so that an outage
// is reported as one without waiting out the whole publish.
func (p *Publisher) await(ctx context.Context, a *answers, results <-chan result) (gone error) {
	check := time.NewTicker(checkInterval)
	defer check.Stop()
wait:
	for a.waiting > 0 {
		select {
		case r := <-results:
			a.take(p, r)
		case <-check.C:
			if err := p.ping(ctx, checkInterval); err != nil && refused(err) {
				gone = err
				break wait
			}
		case <-ctx.Done():
			break wait
		}
	}
	for a.waiting > 0 { // answers that came meanwhile still count
		select {
		case r := <-results:
			a.take(p, r)
			continue
		default:
		}
		break
	}
	return gone
}

// unanswered gives the records left without an answer their error:
// unavailable when no broker answered (gone), else an unknown outcome.
// When none of the batch was confirmed, the next Publish checks first.
func (a *answers) unanswered(ctx context.Context, gone error) {
	for i, env := range a.batch {
		if a.errs[i] != nil || a.answered[i] {
			continue
		}
		if gone != nil {
			a.errs[i] = publisher.Unavailable(fmt.Errorf("kafka: topic %s: no broker reachable: %w (the record stays queued in the client and may still be written when a broker returns)", env.Destination, gone))
		} else {
			a.errs[i] = publisher.Unknown(fmt.Errorf("kafka: topic %s: no acknowledgement before the publish ended (%w); the record may still be written", env.Destination, context.Cause(ctx)))
		}
	}
	if a.confirmed == 0 {
		a.doubt = true
	}
}

// result is a record's answer: its index in the batch and its error.
type result struct {
	i   int
	err error
}

// PublishesRuns reports whether the Publisher takes a key's run of
// messages in one call: true when it flushes the client itself
// (kgo.ManualFlushing, as Dial's client does).
func (p *Publisher) PublishesRuns() bool { return p.manual }

// checkInterval is how often Publish checks that a broker answers while
// it waits for acknowledgements.
const checkInterval = time.Second

// ping asks any broker for metadata, within d.
func (p *Publisher) ping(ctx context.Context, d time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return p.client.Ping(pctx)
}

// probe checks that some broker answers; its error is Unavailable.
func (p *Publisher) probe(ctx context.Context) error {
	err := p.ping(ctx, p.probeTimeout)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("kafka: not sent: %w", ctx.Err())
	case errors.Is(err, kgo.ErrClientClosed):
		return ErrClosed
	}
	return publisher.Unavailable(fmt.Errorf("kafka: no broker reachable: %w", err))
}

// Close makes later Publish calls fail. A client built by Dial is closed,
// failing the records it still holds; a client given to New is left open.
func (p *Publisher) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	if p.own {
		p.client.Close()
	}
	if p.runs != nil {
		p.runs.close()
	}
	return nil
}
