package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/publisher"
)

// publishResult holds the figures of publish.
type publishResult struct {
	Messages int `json:"messages"`
	// Confirmed counts the messages the publisher confirmed (a nil error).
	Confirmed int64 `json:"confirmed"`
	// Failed counts the messages it returned an error for; a run with any
	// fails, so a report always shows 0.
	Failed int64 `json:"failed"`
	runCost
	Batches publishBatches `json:"batches"`
	// HeldAtDestination is what the run's stream, queue or streams held
	// after the last confirmation, when the destination can tell (NATS,
	// RabbitMQ, Redis); it must equal Confirmed.
	HeldAtDestination *int64 `json:"held_at_destination,omitempty"`
	SinkRequests      int64  `json:"sink_requests,omitempty"`
}

// publishBatches counts the rounds and the Publish calls they made.
type publishBatches struct {
	// Rounds is how many rounds of up to BatchSize messages the workers
	// ran.
	Rounds    int64 `json:"rounds"`
	BatchSize int   `json:"batch_size"`
	// Calls is how many Publish calls the rounds made: one per wave, a
	// wave holding at most one message of each business key.
	Calls    int64   `json:"calls"`
	MeanCall float64 `json:"mean_call"`
	MaxCall  int     `json:"max_call"`
}

// publishStats is shared by the workers.
type publishStats struct {
	confirmed, failed atomic.Int64
	rounds, calls     atomic.Int64
	maxCall           atomic.Int64

	mu       sync.Mutex
	firstErr error
}

func (s *publishStats) fail(n int, err error) {
	s.failed.Add(int64(n))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstErr == nil {
		s.firstErr = err
	}
}

// publish sends the messages straight to the destination's Publisher the
// way a relay does, with no database: W workers, each with its own share
// of the business keys (as each relay worker owns a share of the
// partitions, and a key lives in one), run rounds of up to B messages;
// a round goes out in waves holding at most one message per key, one
// Publish call per wave, and a worker waits for each call's
// confirmations before the next. It stops at the first failed message.
func (b *bench) publish(ctx context.Context) (*publishResult, error) {
	workers := b.o.workersOrDefault()
	batch := b.o.batchSizeOrDefault()
	n := b.o.messages
	topic := b.topic("publish")
	res := &publishResult{Messages: n, Batches: publishBatches{BatchSize: batch}}

	// Message i has key i mod keys, as drain's pre-fill gives them; key k
	// belongs to worker k mod W.
	quota := make([]int, workers)
	keys := make([][]int, workers)
	if b.o.keys > 0 {
		for k := range b.o.keys {
			keys[k%workers] = append(keys[k%workers], k)
		}
		for i := range n {
			quota[(i%b.o.keys)%workers]++
		}
	} else {
		for i := range n {
			quota[i%workers]++
		}
	}

	var st publishStats
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runtime.GC()
	m0 := sampleMachine()
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		if quota[w] == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !b.publishWorker(ctx, topic, keys[w], quota[w], batch, &st) {
				cancel()
			}
		}()
	}
	var last int64
	stop := b.every(func(time.Duration) string {
		c := st.confirmed.Load()
		line := fmt.Sprintf("publish: %s/%s confirmed, %s msg/s", commas(c), commas(int64(n)), commas(c-last))
		last = c
		return line
	})
	wg.Wait()
	stop()
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	res.Machine = cpuSince(m0)

	res.Confirmed = st.confirmed.Load()
	res.Failed = st.failed.Load()
	if res.Failed > 0 {
		return nil, fmt.Errorf("publish: %s messages failed, the first: %v (%s of %s confirmed before the run stopped)",
			commas(res.Failed), st.firstErr, commas(res.Confirmed), commas(int64(n)))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if res.Confirmed != int64(n) {
		return nil, fmt.Errorf("publish: %s of %s messages confirmed", commas(res.Confirmed), commas(int64(n)))
	}
	res.measure(res.Confirmed, wall, cpu)
	res.Batches.Rounds = st.rounds.Load()
	res.Batches.Calls = st.calls.Load()
	res.Batches.MaxCall = int(st.maxCall.Load())
	if res.Batches.Calls > 0 {
		res.Batches.MeanCall = float64(res.Confirmed) / float64(res.Batches.Calls)
	}
	if b.dest.sink != nil {
		res.SinkRequests = b.dest.sink.requests.Load()
	}
	if b.brokerHeld != nil {
		vctx, vcancel := context.WithTimeout(ctx, 30*time.Second)
		held, err := b.brokerHeld(vctx)
		vcancel()
		if err != nil {
			return nil, fmt.Errorf("verify: count the messages in the %s: %w", b.brokerWhat, err)
		}
		if held != res.Confirmed {
			return nil, fmt.Errorf("verify: the %s holds %s messages after %s were confirmed", b.brokerWhat, commas(held), commas(res.Confirmed))
		}
		res.HeldAtDestination = &held
	}
	return res, nil
}

// publishWorker publishes count messages over its keys in rounds of
// batch. It returns false when a message failed or ctx ended.
func (b *bench) publishWorker(ctx context.Context, topic string, keys []int, count, batch int, st *publishStats) bool {
	next := 0 // index into keys of the next message's key
	for sent := 0; sent < count; {
		if ctx.Err() != nil {
			return false
		}
		size := min(batch, count-sent)
		waves := b.round(topic, keys, &next, size)
		st.rounds.Add(1)
		for _, wave := range waves {
			if !publishCall(ctx, b.dest.pub, wave, st) {
				return false
			}
		}
		sent += size
	}
	return true
}

// round builds the envelopes of one round, as the relay would hand them
// to the publisher, and splits them into its waves.
func (b *bench) round(topic string, keys []int, next *int, size int) [][]*outbox.Envelope {
	now := time.Now()
	var waves [][]*outbox.Envelope
	seen := map[string]int{}
	for range size {
		key := ""
		if len(keys) > 0 {
			key = "key-" + strconv.Itoa(keys[*next%len(keys)])
			*next++
		}
		waves = inWave(waves, seen, envelope(uuid.Must(uuid.NewV7()).String(), topic, key, b.payload, now))
	}
	return waves
}

// envelope is a message as the relay hands it to the publisher.
func envelope(id, topic, key string, payload []byte, now time.Time) *outbox.Envelope {
	env := &outbox.Envelope{
		ID:          id,
		Topic:       topic,
		Destination: topic,
		Key:         key,
		Payload:     payload,
		Headers: map[string]string{
			publisher.HeaderTopic:       topic,
			publisher.HeaderContentType: publisher.DefaultContentType,
		},
		Attempt:   1,
		CreatedAt: now,
	}
	if key != "" {
		env.Headers[publisher.HeaderBusinessKey] = key
	}
	return env
}

// inWave adds env to waves, in which the j-th message of a key (seen
// counts them) goes in wave j and a message without a key in the first:
// no wave holds two messages of a key.
func inWave(waves [][]*outbox.Envelope, seen map[string]int, env *outbox.Envelope) [][]*outbox.Envelope {
	w := 0
	if env.Key != "" {
		w = seen[env.Key]
		seen[env.Key] = w + 1
	}
	for len(waves) <= w {
		waves = append(waves, nil)
	}
	waves[w] = append(waves[w], env)
	return waves
}

// publishCall makes one Publish call to pub, bounded like the relay's by
// the default publish timeout, and counts its results.
func publishCall(ctx context.Context, pub outbox.Publisher, wave []*outbox.Envelope, st *publishStats) bool {
	pctx, cancel := context.WithTimeout(ctx, outbox.DefaultPublishTimeout)
	errs := pub.Publish(pctx, wave)
	cancel()
	st.calls.Add(1)
	for {
		m := st.maxCall.Load()
		if int64(len(wave)) <= m || st.maxCall.CompareAndSwap(m, int64(len(wave))) {
			break
		}
	}
	if len(errs) != len(wave) {
		st.fail(len(wave), fmt.Errorf("the publisher returned %d results for %d messages", len(errs), len(wave)))
		return false
	}
	ok := 0
	var failed []error
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			failed = append(failed, err)
		}
	}
	st.confirmed.Add(int64(ok))
	if len(failed) > 0 {
		if ctx.Err() != nil {
			return false // interrupted, or another worker failed first
		}
		st.fail(len(failed), failed[0])
		return false
	}
	return true
}

func writePublish(w io.Writer, p *publishResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "confirmed\t%s of %s messages, %s failed\n", commas(p.Confirmed), commas(int64(p.Messages)), commas(p.Failed))
	p.runCost.write(tw, "the destination's")
	bs := p.Batches
	fmt.Fprintf(tw, "batches\t%s rounds of up to %s; %s Publish calls (at most one message per key each), mean %.0f, max %s\n",
		commas(bs.Rounds), commas(int64(bs.BatchSize)), commas(bs.Calls), bs.MeanCall, commas(int64(bs.MaxCall)))
	if p.HeldAtDestination != nil {
		fmt.Fprintf(tw, "destination\tholds %s messages after the run\n", commas(*p.HeldAtDestination))
	}
	if p.SinkRequests > 0 {
		fmt.Fprintf(tw, "sink\t%s requests\n", commas(p.SinkRequests))
	}
	tw.Flush()
}
