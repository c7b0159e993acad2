package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
)

// Headers the steady producers put on every message.
const (
	// headerSlot is the message's index in the schedule.
	headerSlot = "bench-slot"
	// headerIntended is its intended send time, Unix nanoseconds.
	headerIntended = "bench-t"
)

// Histogram range: 1 µs to 60 s, 3 significant figures.
const (
	histMin  = 1
	histMax  = int64(60 * time.Second / time.Microsecond)
	histSigs = 3
	// maxSlots bounds the schedule's per-message bookkeeping.
	maxSlots = 50_000_000
)

type steadyResult struct {
	TargetRate   float64 `json:"target_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	// Committed counts measured messages (intended after the warm-up)
	// whose transaction committed.
	Committed int64 `json:"committed"`
	// Count is how many of them were confirmed: the latency samples.
	Count int64 `json:"count"`
	// Unconfirmed were committed but not confirmed when the bench gave up
	// waiting.
	Unconfirmed int64 `json:"unconfirmed"`
	// LateSends started more than 1 ms after their intended time: the
	// producers could not keep the schedule.
	LateSends int64 `json:"late_sends"`
	// BacklogAtEnd is the run's pending rows when the producers stopped.
	BacklogAtEnd int64 `json:"backlog_at_end"`
	// Latency is confirm time minus intended send time.
	Latency latencySummary `json:"latency_ms"`
	// CommitToConfirm is confirm time minus the producer's commit return.
	CommitToConfirm latencySummary `json:"commit_to_confirm_ms"`
	// LatencyToReceipt and CommitToReceipt measure to the consumer's
	// receipt instead (--consume only).
	LatencyToReceipt *latencySummary `json:"latency_to_receipt_ms,omitempty"`
	CommitToReceipt  *latencySummary `json:"commit_to_receipt_ms,omitempty"`
	Batches          batchStats      `json:"batches"`
	CPUSeconds       float64         `json:"cpu_seconds"`
	PeakRSSBytes     int64           `json:"peak_rss_bytes"`
	Machine          *machineCPU     `json:"machine,omitempty"`
	// RelayDBCores and ProducerDBCores are the database CPU (PostgreSQL
	// backends, in cores over the run) of the relays' own pool and of the
	// producers' pool: per message, the relay's cost to its database
	// apart from the producers' and from anything else the server runs.
	RelayDBCores    *float64 `json:"relay_db_cores,omitempty"`
	ProducerDBCores *float64 `json:"producer_db_cores,omitempty"`
}

// latencySummary is a histogram in milliseconds.
type latencySummary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
	// Clamped counts samples above the histogram's 60 s range.
	Clamped int64 `json:"clamped,omitempty"`
}

// hist is a mutex-guarded HDR histogram of microseconds.
type hist struct {
	mu      sync.Mutex
	h       *hdrhistogram.Histogram
	clamped int64
}

func newHist() *hist { return &hist{h: hdrhistogram.New(histMin, histMax, histSigs)} }

func (h *hist) record(d time.Duration) {
	us := max(d.Microseconds(), histMin)
	h.mu.Lock()
	defer h.mu.Unlock()
	if us > histMax {
		us = histMax
		h.clamped++
	}
	_ = h.h.RecordValue(us)
}

func (h *hist) summary() latencySummary {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return latencySummary{
		Count:   h.h.TotalCount(),
		Mean:    h.h.Mean() / 1000,
		P50:     ms(h.h.ValueAtQuantile(50)),
		P90:     ms(h.h.ValueAtQuantile(90)),
		P99:     ms(h.h.ValueAtQuantile(99)),
		P999:    ms(h.h.ValueAtQuantile(99.9)),
		Max:     ms(h.h.Max()),
		Clamped: h.clamped,
	}
}

// recorder wraps the destination: for every message it confirms it
// records the latency from the intended send time, and from the commit;
// with a consumer attached, the same for every message received.
type recorder struct {
	inner     outbox.Publisher
	firstSlot int64 // first measured slot; earlier ones are warm-up

	commit           []atomic.Int64 // per slot: commit time, Unix ns (0 = not yet)
	confirm, receipt *stage
	all              atomic.Int64 // slots confirmed, warm-up included
}

// stage is one point a message reaches after its commit: confirmed by
// the destination, or received by a consumer.
type stage struct {
	at     []atomic.Int64 // per slot: when, Unix ns (0 = not yet)
	c2Done []atomic.Bool  // per slot: commit→stage recorded (by whichever side came second)
	count  atomic.Int64   // measured slots that reached it
	lat    *hist          // from the intended send time
	c2     *hist          // from the commit
}

func newStage(slots int64) *stage {
	return &stage{at: make([]atomic.Int64, slots), c2Done: make([]atomic.Bool, slots), lat: newHist(), c2: newHist()}
}

func newRecorder(inner outbox.Publisher, slots, firstSlot int64) *recorder {
	return &recorder{
		inner:     inner,
		firstSlot: firstSlot,
		commit:    make([]atomic.Int64, slots),
		confirm:   newStage(slots),
		receipt:   newStage(slots),
	}
}

// reached records that the message with these headers reached st at now;
// it reports whether this was the message's first time there.
func (r *recorder) reached(st *stage, headers func(string) string, now int64) bool {
	slot, err := strconv.ParseInt(headers(headerSlot), 10, 64)
	if err != nil || slot < 0 || slot >= int64(len(st.at)) {
		return false
	}
	if !st.at[slot].CompareAndSwap(0, now) {
		return false // again: count the first time only
	}
	if slot < r.firstSlot {
		return true
	}
	st.count.Add(1)
	if t, err := strconv.ParseInt(headers(headerIntended), 10, 64); err == nil {
		st.lat.record(time.Duration(now - t))
	}
	if c := r.commit[slot].Load(); c != 0 && st.c2Done[slot].CompareAndSwap(false, true) {
		st.c2.record(time.Duration(now - c))
	}
	return true
}

// Publish forwards to the destination and records what it confirmed.
// PublishesRuns passes on whether the destination takes key runs.
func (r *recorder) PublishesRuns() bool {
	rp, ok := r.inner.(outbox.RunPublisher)
	return ok && rp.PublishesRuns()
}

func (r *recorder) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	errs := r.inner.Publish(ctx, batch)
	now := time.Now().UnixNano()
	for i, env := range batch {
		if i >= len(errs) || errs[i] != nil {
			continue
		}
		if r.reached(r.confirm, func(k string) string { return env.Headers[k] }, now) {
			r.all.Add(1)
		}
	}
	return errs
}

// received records a message a consumer received.
func (r *recorder) received(headers func(string) string) {
	r.reached(r.receipt, headers, time.Now().UnixNano())
}

// Close closes nothing: the destination is closed by the bench.
func (r *recorder) Close() error { return nil }

// committed records slot's commit time, once its transaction committed.
func (r *recorder) committed(slot int64, at time.Time) {
	c := at.UnixNano()
	r.commit[slot].Store(c)
	if slot < r.firstSlot {
		return
	}
	for _, st := range []*stage{r.confirm, r.receipt} {
		if t := st.at[slot].Load(); t != 0 && st.c2Done[slot].CompareAndSwap(false, true) {
			st.c2.record(time.Duration(t - c))
		}
	}
}

// steady runs open-loop producers at the target rate with the relays
// running, and measures latency from each message's intended send time.
func (b *bench) steady(ctx context.Context) (*steadyResult, error) {
	if err := b.checkAlone(ctx, true); err != nil {
		return nil, err
	}
	if err := b.createTable(ctx); err != nil {
		return nil, err
	}
	o := b.o
	interval := float64(time.Second) / o.rate
	slots := int64(o.rate * (o.warmup + o.duration).Seconds())
	firstSlot := int64(o.rate * o.warmup.Seconds())
	if slots-firstSlot < 1 {
		return nil, usagef("%s: --rate × --duration schedules no message", o.workload)
	}
	if slots > maxSlots {
		return nil, usagef("%s: --rate × (--warmup + --duration) schedules more than %s messages", o.workload, commas(maxSlots))
	}
	if err := b.openRelayPool(ctx); err != nil {
		return nil, err
	}
	rec := newRecorder(b.dest.pub, slots, firstSlot)
	var stats batchCollector
	cpu0 := cpuTime()
	if o.consume {
		stop, err := b.brokerConsume(ctx, rec.received)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	rs, err := b.startRelays(ctx, rec, stats.add)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rs.stop() }()
	m0, t0 := sampleMachine(), time.Now()
	relay0, producer0 := b.backendCPU(ctx, b.relayAppName()), b.backendCPU(ctx, b.producerAppName())

	run := &steadyRun{b: b, rec: rec, topic: b.topic("steady"), insert: b.insertSQL(), payload: string(b.payload),
		start:    time.Now().Add(50 * time.Millisecond), // let the relays take their partitions
		interval: interval, slots: slots, firstSlot: firstSlot}
	topic, start := run.topic, run.start
	measureFrom := start.Add(o.warmup)
	committed := &run.committed
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run.cancel = cancel
	var wg sync.WaitGroup
	for range o.clientList[0] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.produce(pctx)
		}()
	}

	producersDone := make(chan struct{})
	go func() { wg.Wait(); close(producersDone) }()
	var lastC, lastD int64
	var backlog []backlogPoint
	sample := time.NewTicker(100 * time.Millisecond)
	defer sample.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	progress := func(phase string) {
		c, d := committed.Load(), rec.confirm.count.Load()
		fmt.Fprintf(b.stderr, "steady: %s: %s committed (%s/s), %s measured confirmed (%s/s)\n",
			phase, commas(c), commas(c-lastC), commas(d), commas(d-lastD))
		lastC, lastD = c, d
	}
wait:
	for {
		select {
		case <-producersDone:
			break wait
		case err := <-rs.failed:
			cancel()
			<-producersDone
			return nil, err
		case now := <-sample.C:
			backlog = append(backlog, backlogPoint{At: now.Sub(start).Seconds(), Backlog: committed.Load() - rec.all.Load()})
		case now := <-tick.C:
			phase := "warm-up"
			if now.After(measureFrom) {
				phase = "measuring"
			}
			progress(phase)
		}
	}
	end := time.Now()
	if run.firstErr != nil {
		return nil, run.firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &steadyResult{TargetRate: o.rate, Committed: run.measured.Load(), LateSends: run.late.Load()}
	res.AchievedRate = float64(res.Committed) / end.Sub(measureFrom).Seconds()
	res.BacklogAtEnd, err = b.countStatus(ctx, topic, store.StatusPending)
	if err != nil {
		return nil, err
	}

	if err := b.awaitConfirmed(ctx, rs, rec, res.Committed, tick, progress); err != nil {
		return nil, err
	}
	relay1, producer1 := b.backendCPU(ctx, b.relayAppName()), b.backendCPU(ctx, b.producerAppName())
	secs := time.Since(t0).Seconds()
	res.RelayDBCores, res.ProducerDBCores = cpuBetween(relay0, relay1, secs), cpuBetween(producer0, producer1, secs)
	if err := rs.stop(); err != nil {
		return nil, err
	}
	return b.steadyReport(res, rec, &stats, m0, cpu0, backlog)
}

// awaitConfirmed waits (within max(10 s, --duration)) for the relays to
// confirm the committed messages, so slow ones count, and with --consume
// for the consumer to receive what was confirmed.
func (b *bench) awaitConfirmed(ctx context.Context, rs *relaySet, rec *recorder, committed int64, tick *time.Ticker, progress func(string)) error {
	o := b.o
	// Let the relays confirm what was committed, so slow messages count.
	giveUp := time.NewTimer(max(10*time.Second, o.duration))
	defer giveUp.Stop()
	for rec.confirm.count.Load() < committed {
		select {
		case <-giveUp.C:
			fmt.Fprintf(b.stderr, "steady: gave up waiting for %s unconfirmed messages\n", commas(committed-rec.confirm.count.Load()))
		case err := <-rs.failed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			progress("draining")
			continue
		case <-time.After(10 * time.Millisecond):
			continue
		}
		break
	}
	if o.consume {
		// And the consumer receive what was confirmed.
		for rec.receipt.count.Load() < rec.confirm.count.Load() {
			select {
			case <-giveUp.C:
				fmt.Fprintf(b.stderr, "steady: gave up waiting for the consumer to receive %s confirmed messages\n", commas(rec.confirm.count.Load()-rec.receipt.count.Load()))
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
				continue
			}
			break
		}
	}
	return nil
}

// steadyReport fills in the figures of a finished steady run and draws
// its plot.
func (b *bench) steadyReport(res *steadyResult, rec *recorder, stats *batchCollector, m0 *machineSample, cpu0 time.Duration, backlog []backlogPoint) (*steadyResult, error) {
	o := b.o
	res.CPUSeconds = (cpuTime() - cpu0).Seconds()
	res.Machine = cpuSince(m0)
	res.PeakRSSBytes = peakRSS()
	res.Latency = rec.confirm.lat.summary()
	res.CommitToConfirm = rec.confirm.c2.summary()
	curves := []curve{
		rec.confirm.lat.curve("intended send → confirmed", "#d62728"),
		rec.confirm.c2.curve("commit → confirmed", "#1f77b4"),
	}
	if o.consume {
		lr, cr := rec.receipt.lat.summary(), rec.receipt.c2.summary()
		res.LatencyToReceipt, res.CommitToReceipt = &lr, &cr
		curves = append(curves,
			rec.receipt.lat.curve("intended send → received", "#ff7f0e"),
			rec.receipt.c2.curve("commit → received", "#2ca02c"))
	}
	res.Count = res.Latency.Count
	res.Unconfirmed = max(res.Committed-rec.confirm.count.Load(), 0)
	res.Batches = stats.snapshot()
	if res.Count == 0 {
		return res, errors.New("steady: no message was confirmed")
	}
	if o.plot != "" {
		title := fmt.Sprintf("outbox bench steady: %s msg/s target, %s achieved", commas(int64(o.rate)), commas(int64(res.AchievedRate)))
		subtitle := fmt.Sprintf("%s → %s; %d relay(s), %d producer clients", b.d, b.dest.name, o.relays, o.clientList[0])
		err := writePlot(o.plot, title, subtitle, curves, backlog)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// steadyRun is the state the producers of one steady run share.
type steadyRun struct {
	b                      *bench
	rec                    *recorder
	topic, insert, payload string
	start                  time.Time
	interval               float64 // between intended sends, in ns
	slots, firstSlot       int64

	next, committed, measured, late atomic.Int64

	cancel   context.CancelFunc // stops every producer
	errOnce  sync.Once
	firstErr error
}

// produce is one producer client: it takes the next slot, waits for its
// intended send time and commits a business row and its message in one
// transaction, until the slots run out or ctx ends.
func (s *steadyRun) produce(ctx context.Context) {
	b := s.b
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		slot := s.next.Add(1) - 1
		if slot >= s.slots {
			return
		}
		intended := s.start.Add(time.Duration(float64(slot) * s.interval))
		if d := time.Until(intended); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if d < -time.Millisecond {
			s.late.Add(1)
		}
		msg := b.message(s.topic, slot)
		msg.Headers = map[string]string{
			headerSlot:     strconv.FormatInt(slot, 10),
			headerIntended: strconv.FormatInt(intended.UnixNano(), 10),
		}
		err := b.conn.inTx(ctx, func(ctx context.Context, tx txn) error {
			if err := tx.exec(ctx, s.insert, s.payload); err != nil {
				return err
			}
			_, err := tx.enqueue(ctx, true, []outbox.Message{msg})
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.errOnce.Do(func() { s.firstErr = fmt.Errorf("steady: producer: %w", err) })
			}
			s.cancel()
			return
		}
		s.rec.committed(slot, time.Now())
		s.committed.Add(1)
		if slot >= s.firstSlot {
			s.measured.Add(1)
		}
	}
}
