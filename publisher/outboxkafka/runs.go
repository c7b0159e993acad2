package outboxkafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/publisher"
)

// Key runs.
//
// The relay may hand a Publisher whose client flushes only when told
// (kgo.ManualFlushing) a run of one key's messages in one call. The
// idempotent producer keeps a partition's records in the order they were
// buffered, and when the broker fails a batch the client fails every
// record buffered behind it in that partition (to keep the sequence
// numbers right) — but only those buffered by then: a record buffered
// after the failure was handled is sent under a new producer epoch and
// could land ahead of the retry of the record that failed. So records are
// buffered while nothing is in flight, and sent only once every record of
// the call is buffered:
//
//   - a gate is held by one call at a time while it buffers its records,
//     and by the flusher from the start of a flush until every buffered
//     record is answered;
//   - records that would fail alone before they are buffered (larger than
//     the topic's max.message.bytes or the client's batch limit; beyond
//     the client's buffer) are caught first: too large is permanent (the
//     message goes dead, which unblocks its key), and a full buffer ends
//     the call's buffering there, the rest of the call not sent.
//
// A call that finds the gate held (a flush still waiting for answers)
// waits for it, checking now and then that a broker answers.

// DefaultBatchMaxBytes is the batch limit of a topic whose
// max.message.bytes the brokers do not tell (kgo's default).
const DefaultBatchMaxBytes = 1000012

// limitRetry is how long a topic whose max.message.bytes could not be
// read is left at DefaultBatchMaxBytes before it is asked again.
const limitRetry = time.Minute

// limits holds the topics' max.message.bytes, read from the brokers.
type limits struct {
	mu     sync.Mutex
	topics map[string]limit
	// clientMax is the client's own batch limit (kgo.ProducerBatchMaxBytes)
	// when it is not batchMax; 0 when it is.
	clientMax int32
}

type limit struct {
	bytes int32
	known bool      // the brokers said
	retry time.Time // not known: when to ask again
}

// batchMax is the client's batch limit for topic (for
// kgo.ProducerBatchMaxBytesFn): the topic's max.message.bytes once it was
// read, which Publish does before the topic's first record.
func (l *limits) batchMax(topic string) int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.topics[topic]; ok && t.known {
		return t.bytes
	}
	return DefaultBatchMaxBytes
}

// recordMax is the largest record topic takes, by recordBound.
func (l *limits) recordMax(topic string) int32 {
	n := l.batchMax(topic)
	if l.clientMax > 0 {
		n = min(n, l.clientMax)
	}
	return n
}

// learn reads the max.message.bytes of the topics not known yet (or whose
// reading failed more than limitRetry ago), within DefaultProbeTimeout and
// half of what is left of ctx. Brokers that do not answer leave the
// default; the error is the reading's.
func (l *limits) learn(ctx context.Context, cl *kgo.Client, topics []string) error {
	now := time.Now()
	var ask []string
	l.mu.Lock()
	for _, t := range topics {
		if lt, ok := l.topics[t]; !ok || (!lt.known && now.After(lt.retry)) {
			ask = append(ask, t)
		}
	}
	l.mu.Unlock()
	if len(ask) == 0 {
		return nil
	}
	wait := DefaultProbeTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	dctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(dctx, ask...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.topics == nil {
		l.topics = map[string]limit{}
	}
	for _, t := range ask {
		lt := limit{bytes: DefaultBatchMaxBytes, retry: now.Add(limitRetry)}
		if err == nil {
			if rc, rerr := rcs.On(t, nil); rerr == nil && rc.Err == nil {
				for _, c := range rc.Configs {
					if c.Key != "max.message.bytes" || c.Value == nil {
						continue
					}
					if n, perr := strconv.ParseInt(*c.Value, 10, 32); perr == nil && n >= 512 {
						lt = limit{bytes: int32(n), known: true}
					}
				}
			}
		}
		l.topics[t] = lt
	}
	return err
}

// recordBound is an upper bound of the bytes rec takes in a record batch
// of its own: its key, value and headers, their length prefixes, the
// record's own fields and the batch header.
func recordBound(rec *kgo.Record) int {
	n := len(rec.Key) + len(rec.Value) + 96
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	return n
}

// runs buffers and flushes the records of a client that flushes only when
// told.
type runs struct {
	client *kgo.Client
	lim    *limits
	gate   chan struct{} // capacity 1: held while buffering and while flushing
	flush  chan struct{} // capacity 1: a flush is wanted
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// The client's buffer limits (kgo.MaxBufferedRecords,
	// kgo.MaxBufferedBytes; 0: none).
	maxRecords, maxBytes int64
}

// newRuns starts the flusher of client. lim is the limits the client's
// batches are capped by (kgo.ProducerBatchMaxBytesFn), nil when the
// client has a fixed limit of its own.
func newRuns(client *kgo.Client, lim *limits) *runs {
	if lim == nil {
		lim = &limits{clientMax: DefaultBatchMaxBytes}
		if n, ok := client.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok && n > 0 {
			lim.clientMax = n
		}
	}
	r := &runs{client: client, lim: lim, gate: make(chan struct{}, 1), flush: make(chan struct{}, 1), done: make(chan struct{})}
	if n, ok := client.OptValue(kgo.MaxBufferedRecords).(int64); ok {
		r.maxRecords = n
	}
	if n, ok := client.OptValue(kgo.MaxBufferedBytes).(int64); ok {
		r.maxBytes = n
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.flushLoop()
	return r
}

// flushLoop flushes when asked, holding the gate until every buffered
// record is answered.
func (r *runs) flushLoop() {
	defer close(r.done)
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.flush:
		}
		select {
		case <-r.ctx.Done():
			return
		case r.gate <- struct{}{}:
		}
		_ = r.client.Flush(r.ctx) // ends early only when the Publisher closes
		<-r.gate
	}
}

// close stops the flusher.
func (r *runs) close() {
	r.cancel()
	<-r.done
}

// buffer buffers the records of batch in order and has them flushed. A
// message that cannot become a record, or is too large, gets a permanent
// error in errs; one left out because the buffer is full, or because the
// gate could not be had, gets a retryable error. Every record buffered
// sends its answer to results. It returns how many were buffered.
func (r *runs) buffer(ctx context.Context, p *Publisher, batch []*publisher.Envelope, errs []error, results chan<- result) int {
	recs := make([]*kgo.Record, len(batch))
	var topics []string
	seen := map[string]bool{}
	for i, env := range batch {
		rec, err := newRecord(env, p.ce)
		if err != nil {
			errs[i] = publisher.Permanent(err)
			continue
		}
		recs[i] = rec
		if !seen[rec.Topic] {
			seen[rec.Topic] = true
			topics = append(topics, rec.Topic)
		}
	}
	// notSent fails every record still to be sent with err.
	notSent := func(err error) int {
		for i, rec := range recs {
			if rec != nil {
				errs[i] = err
			}
		}
		return 0
	}
	if err := r.lim.learn(ctx, r.client, topics); err != nil && refused(err) {
		p.suspect.Store(true)
		return notSent(publisher.Unavailable(fmt.Errorf("kafka: not sent: no broker reachable: %w", err)))
	}
	for i, rec := range recs {
		if rec == nil {
			continue
		}
		if n, max := recordBound(rec), r.lim.recordMax(rec.Topic); n > int(max) {
			errs[i] = publisher.Permanent(fmt.Errorf("kafka: topic %s: record of up to %d bytes does not fit in a batch of %d bytes (the topic's max.message.bytes or kgo.ProducerBatchMaxBytes)", rec.Topic, n, max))
			recs[i] = nil
		}
	}
	if err := r.acquire(ctx, p); err != nil {
		return notSent(err)
	}
	free, freeBytes := r.maxRecords-r.client.BufferedProduceRecords(), r.maxBytes-r.client.BufferedProduceBytes()
	buffered, full := 0, false
	for i, rec := range recs {
		if rec == nil {
			continue
		}
		size := int64(len(rec.Key) + len(rec.Value))
		for _, h := range rec.Headers {
			size += int64(len(h.Key) + len(h.Value))
		}
		if full || (r.maxRecords > 0 && free <= 0) || (r.maxBytes > 0 && size > freeBytes) {
			// Everything after the first record that does not fit stays
			// out, so that no key's later record goes without it.
			full = true
			errs[i] = publisher.RetryAfter(errors.New("kafka: not sent: the client's buffer is full (kgo.MaxBufferedRecords, kgo.MaxBufferedBytes)"), 100*time.Millisecond)
			continue
		}
		free--
		freeBytes -= size
		buffered++
		r.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { results <- result{i, err} })
	}
	<-r.gate
	select {
	case r.flush <- struct{}{}:
	default: // a flush is already wanted: it takes these records too
	}
	return buffered
}

// acquire takes the gate, waiting while a flush is still answered. It
// gives up when ctx ends or when no broker can be reached.
func (r *runs) acquire(ctx context.Context, p *Publisher) error {
	select {
	case r.gate <- struct{}{}:
		return nil
	default:
	}
	check := time.NewTicker(checkInterval)
	defer check.Stop()
	for {
		select {
		case r.gate <- struct{}{}:
			return nil
		case <-ctx.Done():
			// Not the messages' fault: the records before them are
			// still being answered.
			return publisher.RetryAfter(fmt.Errorf("kafka: not sent: earlier records were still unanswered when the publish ended (%w)", context.Cause(ctx)), time.Second)
		case <-check.C:
			if err := p.ping(ctx, checkInterval); err != nil && refused(err) {
				p.suspect.Store(true)
				return publisher.Unavailable(fmt.Errorf("kafka: not sent: no broker reachable: %w", err))
			}
		}
	}
}
