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
// (kgo.ManualFlushing) a run of one key's messages in one call, and
// promises that no message of a key is written after an earlier one of
// the call failed. The idempotent producer keeps a partition's records in
// the order they were buffered, but it keeps up to five produce requests
// in flight to a broker: when the broker refuses one batch for good (a
// policy, an invalid record), the batches sent behind it in the same
// partition come back out of sequence, and the client writes them again
// under a new producer epoch — after the failed one. So a partition never
// has more than one batch in flight:
//
//   - a flush carries at most one batch per topic and partition: records
//     are buffered while the bytes buffered for their topic since the last
//     flush, counted by recordBound, fit in one batch, and a call whose run
//     is longer is sent one flush at a time, each answered before the next
//     is buffered; after a flush, the rest of a key whose record failed
//     (other than permanently) is not sent;
//   - a gate is held by one call at a time while it buffers its records,
//     and by the flusher from the start of a flush until every buffered
//     record is answered, so that nothing is buffered behind a batch in
//     flight;
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
	// client is the batch limit the client applies
	// (kgo.ProducerBatchMaxBytesFn): batchMax for Dial's client unless its
	// options replaced it; nil: DefaultBatchMaxBytes.
	client func(topic string) int32
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

// recordMax is the largest record topic takes, by recordBound: the
// lower of the topic's max.message.bytes and the client's batch limit.
// It is also what one batch of the topic holds.
func (l *limits) recordMax(topic string) int32 {
	n := l.batchMax(topic)
	if l.client != nil {
		n = min(n, l.client(topic))
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
	// Held with the gate: the bytes (by recordBound) buffered for each
	// topic since the last flush began, and a channel closed when the
	// next flush has been answered.
	unflushed map[string]int
	flushed   chan struct{}
}

// newRuns starts the flusher of client. lim is the limits Dial's client
// caps its batches by (kgo.ProducerBatchMaxBytesFn), nil for a client of
// the caller's.
func newRuns(client *kgo.Client, lim *limits) *runs {
	if lim == nil {
		lim = &limits{}
	}
	if fn, ok := client.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32); ok && fn != nil {
		lim.client = fn
	}
	r := &runs{client: client, lim: lim, gate: make(chan struct{}, 1), flush: make(chan struct{}, 1), done: make(chan struct{}),
		unflushed: map[string]int{}, flushed: make(chan struct{})}
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
		clear(r.unflushed)
		answered := r.flushed
		r.flushed = make(chan struct{})
		_ = r.client.Flush(r.ctx) // ends early only when the Publisher closes
		<-r.gate
		close(answered)
	}
}

// close stops the flusher.
func (r *runs) close() {
	r.cancel()
	<-r.done
}

// publish publishes a's batch one flush at a time: each flush's records
// are answered before the next flush is buffered, and a key whose record
// failed (other than permanently) sends nothing more in the call.
func (r *runs) publish(ctx context.Context, p *Publisher, a *answers, results chan result) {
	recs := r.records(ctx, p, a.batch, a.errs)
	for from := 0; ; {
		for from < len(recs) && recs[from] == nil {
			from++
		}
		if from == len(recs) {
			return
		}
		n, next := r.buffer(ctx, p, recs, from, a.errs, results)
		a.waiting += n
		if n == 0 {
			return // nothing more could be buffered: the rest have their errors
		}
		gone := p.await(ctx, a, results)
		if a.waiting > 0 {
			err := publisher.RetryAfter(fmt.Errorf("kafka: not sent: earlier records of the call were still unanswered when the publish ended (%w)", context.Cause(ctx)), time.Second)
			if gone != nil {
				err = publisher.Unavailable(fmt.Errorf("kafka: not sent: no broker reachable: %w", gone))
			}
			notSent(recs[next:], a.errs[next:], err)
			a.unanswered(ctx, gone)
			return
		}
		failed := map[string]error{}
		for i := from; i < next; i++ {
			if key := a.batch[i].Key; recs[i] != nil && key != "" && a.errs[i] != nil && publisher.Classify(a.errs[i]) != publisher.ClassPermanent {
				if _, ok := failed[key]; !ok {
					failed[key] = a.errs[i]
				}
			}
		}
		for i := next; i < len(recs); i++ {
			if rec := recs[i]; rec != nil && len(failed) > 0 {
				if err, ok := failed[a.batch[i].Key]; ok {
					a.errs[i] = fmt.Errorf("kafka: not sent: an earlier message of its key failed: %w", err)
					recs[i] = nil
				}
			}
		}
		from = next
	}
}

// records makes batch's records. A message that cannot become a record,
// or is too large for its topic, gets a permanent error in errs and a nil
// record; when no broker answers the reading of the topics' limits, every
// message gets that error and every record is nil.
func (r *runs) records(ctx context.Context, p *Publisher, batch []*publisher.Envelope, errs []error) []*kgo.Record {
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
	if err := r.lim.learn(ctx, r.client, topics); err != nil && refused(err) {
		p.suspect.Store(true)
		notSent(recs, errs, publisher.Unavailable(fmt.Errorf("kafka: not sent: no broker reachable: %w", err)))
		return recs
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
	return recs
}

// notSent gives every record of recs still to be sent err, and drops it.
func notSent(recs []*kgo.Record, errs []error, err error) {
	for i, rec := range recs {
		if rec != nil {
			errs[i] = err
			recs[i] = nil
		}
	}
}

// buffer buffers recs from index from on, in order, while they fit in the
// next flush (one batch per topic), and has them flushed; next is the
// index of the first record left for a later flush (len(recs): none). A
// record left out because the buffer is full, or because the gate could
// not be had, gets a retryable error, and so does every record after it.
// Every record buffered sends its answer to results; n is how many were.
func (r *runs) buffer(ctx context.Context, p *Publisher, recs []*kgo.Record, from int, errs []error, results chan<- result) (n, next int) {
	if err := r.acquire(ctx, p); err != nil {
		notSent(recs[from:], errs[from:], err)
		return 0, len(recs)
	}
	free, freeBytes := r.maxRecords-r.client.BufferedProduceRecords(), r.maxBytes-r.client.BufferedProduceBytes()
	for i := from; i < len(recs); i++ {
		rec := recs[i]
		if rec == nil {
			continue
		}
		bound := recordBound(rec)
		if used := r.unflushed[rec.Topic]; used > 0 && used+bound > int(r.lim.recordMax(rec.Topic)) {
			if n > 0 {
				r.release()
				return n, i
			}
			// Other calls' records fill the flush: let it go, and buffer
			// after its answers.
			answered := r.flushed
			r.release()
			select {
			case <-answered:
			case <-ctx.Done():
				notSent(recs[i:], errs[i:], publisher.RetryAfter(fmt.Errorf("kafka: not sent: earlier records were still unanswered when the publish ended (%w)", context.Cause(ctx)), time.Second))
				return 0, len(recs)
			}
			if err := r.acquire(ctx, p); err != nil {
				notSent(recs[i:], errs[i:], err)
				return 0, len(recs)
			}
			free, freeBytes = r.maxRecords-r.client.BufferedProduceRecords(), r.maxBytes-r.client.BufferedProduceBytes()
			i--
			continue
		}
		size := int64(len(rec.Key) + len(rec.Value))
		for _, h := range rec.Headers {
			size += int64(len(h.Key) + len(h.Value))
		}
		if (r.maxRecords > 0 && free <= 0) || (r.maxBytes > 0 && size > freeBytes) {
			// Everything from the first record that does not fit stays
			// out, so that no key's later record goes without it.
			notSent(recs[i:], errs[i:], publisher.RetryAfter(errors.New("kafka: not sent: the client's buffer is full (kgo.MaxBufferedRecords, kgo.MaxBufferedBytes)"), 100*time.Millisecond))
			break
		}
		free--
		freeBytes -= size
		r.unflushed[rec.Topic] += bound
		n++
		r.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { results <- result{i, err} })
	}
	r.release()
	return n, len(recs)
}

// release lets go of the gate and has what was buffered flushed.
func (r *runs) release() {
	<-r.gate
	select {
	case r.flush <- struct{}{}:
	default: // a flush is already wanted: it takes these records too
	}
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
