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
	TargetRate float64 `json:"target_rate"`
	// AchievedRate is Committed over the measured time: from the end of
	// the warm-up to the producers' last commit, or to the end of the
	// measured time when the producers stop there (a sustain trial).
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
	run, res, err := b.runSteady(ctx, b.o.workload, false, func(*steadyRun, *steadyResult) bool { return true })
	if err != nil {
		return nil, err
	}
	if res.Count == 0 {
		return res, errors.New("steady: no message was confirmed")
	}
	if b.o.plot != "" {
		return res, run.plot(res)
	}
	return res, nil
}

// runSteady runs a steady run from its start to its finish (see
// startSteady, produced and finish); await, given the run and its figures
// when the producers are done, says whether to wait for the relays to
// confirm what was committed.
func (b *bench) runSteady(ctx context.Context, label string, cut bool, await func(*steadyRun, *steadyResult) bool) (*steadyRun, *steadyResult, error) {
	run, err := b.startSteady(ctx, label, cut)
	if err != nil {
		return nil, nil, err
	}
	defer run.stop()
	res, err := run.produced(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := run.finish(ctx, res, await(run, res)); err != nil {
		return nil, nil, err
	}
	return run, res, nil
}

// steadyRun is one run of open-loop producers at --rate with the relays
// running: what its producers share, and what it measured so far.
type steadyRun struct {
	b                      *bench
	label                  string // starts its progress lines
	rec                    *recorder
	stats                  batchCollector
	rs                     *relaySet
	stopConsume            func()
	topic, insert, payload string
	start, measureFrom     time.Time
	interval               float64 // between intended sends, in ns
	slots, firstSlot       int64
	// cut stops the producers when the measured time ends, however many
	// of the scheduled messages they sent.
	cut bool

	// Where the run's cost is measured from.
	cpu0              time.Duration
	m0                *machineSample
	t0                time.Time
	relay0, producer0 map[int]time.Duration

	tick         *time.Ticker // progress lines, once a second
	lastC, lastD int64        // the counts of the last progress line
	backlog      []backlogPoint

	next, committed, measured, late atomic.Int64

	cancel        context.CancelFunc // stops every producer
	producersDone chan struct{}
	errOnce       sync.Once
	firstErr      error
}

// startSteady prepares a steady run — the business table, the relays'
// pool, the recorder in front of the destination, the relays — and starts
// its producers; label starts its progress lines. With cut, the producers
// stop when the measured time ends; without, they send every scheduled
// message, however late. The caller stops the run.
func (b *bench) startSteady(ctx context.Context, label string, cut bool) (*steadyRun, error) {
	if err := b.checkAlone(ctx, true); err != nil {
		return nil, err
	}
	if err := b.createTable(ctx); err != nil {
		return nil, err
	}
	o := b.o
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
	r := &steadyRun{b: b, label: label, topic: b.topic("steady"), insert: b.insertSQL(), payload: string(b.payload),
		interval: float64(time.Second) / o.rate, slots: slots, firstSlot: firstSlot, cut: cut,
		rec: newRecorder(b.dest.pub, slots, firstSlot), stopConsume: func() {}}
	r.cpu0 = cpuTime()
	if o.consume {
		stop, err := b.brokerConsume(ctx, r.rec.received)
		if err != nil {
			return nil, err
		}
		r.stopConsume = stop
	}
	rs, err := b.startRelays(ctx, r.rec, r.stats.add)
	if err != nil {
		r.stopConsume()
		return nil, err
	}
	r.rs = rs
	r.m0, r.t0 = sampleMachine(), time.Now()
	r.relay0, r.producer0 = b.backendCPU(ctx, b.relayAppName()), b.backendCPU(ctx, b.producerAppName())

	r.start = time.Now().Add(50 * time.Millisecond) // let the relays take their partitions
	r.measureFrom = r.start.Add(o.warmup)
	pctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	var wg sync.WaitGroup
	for range o.clientList[0] {
		wg.Go(func() { r.produce(pctx) })
	}
	r.producersDone = make(chan struct{})
	go func() { wg.Wait(); close(r.producersDone) }()
	r.tick = time.NewTicker(time.Second)
	return r, nil
}

// stop ends what still runs of the run: its producers, relays and
// consumer.
func (r *steadyRun) stop() {
	r.cancel()
	<-r.producersDone
	r.tick.Stop()
	_ = r.rs.stop()
	r.stopConsume()
}

// progress prints a progress line for phase.
func (r *steadyRun) progress(phase string) {
	c, d := r.committed.Load(), r.rec.confirm.count.Load()
	fmt.Fprintf(r.b.stderr, "%s: %s: %s committed (%s/s), %s measured confirmed (%s/s)\n",
		r.label, phase, commas(c), commas(c-r.lastC), commas(d), commas(d-r.lastD))
	r.lastC, r.lastD = c, d
}

// produced waits until the producers are done — their schedule sent or,
// for a cut run, the measured time over — sampling the backlog (committed
// but not confirmed) every 100 ms, and returns the run's first figures:
// what was committed, at what rate, and the rows pending when the
// producers stopped.
func (r *steadyRun) produced(ctx context.Context) (*steadyResult, error) {
	b, o := r.b, r.b.o
	sample := time.NewTicker(100 * time.Millisecond)
	defer sample.Stop()
	var cutAt <-chan time.Time
	if r.cut {
		t := time.NewTimer(time.Until(r.measureFrom.Add(o.duration)))
		defer t.Stop()
		cutAt = t.C
	}
wait:
	for {
		select {
		case <-r.producersDone:
			break wait
		case err := <-r.rs.failed:
			r.cancel()
			<-r.producersDone
			return nil, err
		case <-cutAt:
			r.cancel()
		case now := <-sample.C:
			r.backlog = append(r.backlog, backlogPoint{At: now.Sub(r.start).Seconds(), Backlog: r.committed.Load() - r.rec.all.Load()})
		case now := <-r.tick.C:
			phase := "warm-up"
			if now.After(r.measureFrom) {
				phase = "measuring"
			}
			r.progress(phase)
		}
	}
	end := time.Now()
	if r.firstErr != nil {
		return nil, r.firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &steadyResult{TargetRate: o.rate, Committed: r.measured.Load(), LateSends: r.late.Load()}
	measured := end.Sub(r.measureFrom)
	if r.cut {
		measured = o.duration
	}
	res.AchievedRate = float64(res.Committed) / measured.Seconds()
	if o.readPath == readPathSnapshot {
		// Its rows stay pending: the backlog is what was committed and
		// not yet confirmed.
		res.BacklogAtEnd = r.committed.Load() - r.rec.all.Load()
		return res, nil
	}
	var err error
	res.BacklogAtEnd, err = b.countStatus(ctx, r.topic, store.StatusPending)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// finish waits, with await, for the relays to confirm what was committed
// (see awaitConfirmed), stops them and fills in the rest of res: CPU,
// latency, batches.
func (r *steadyRun) finish(ctx context.Context, res *steadyResult, await bool) error {
	b, rec := r.b, r.rec
	if await {
		if err := r.awaitConfirmed(ctx, res.Committed); err != nil {
			return err
		}
	}
	relay1, producer1 := b.backendCPU(ctx, b.relayAppName()), b.backendCPU(ctx, b.producerAppName())
	secs := time.Since(r.t0).Seconds()
	res.RelayDBCores, res.ProducerDBCores = cpuBetween(r.relay0, relay1, secs), cpuBetween(r.producer0, producer1, secs)
	if err := r.rs.stop(); err != nil {
		return err
	}
	res.CPUSeconds = (cpuTime() - r.cpu0).Seconds()
	res.Machine = cpuSince(r.m0)
	res.PeakRSSBytes = peakRSS()
	res.Latency = rec.confirm.lat.summary()
	res.CommitToConfirm = rec.confirm.c2.summary()
	if b.o.consume {
		lr, cr := rec.receipt.lat.summary(), rec.receipt.c2.summary()
		res.LatencyToReceipt, res.CommitToReceipt = &lr, &cr
	}
	res.Count = res.Latency.Count
	res.Unconfirmed = max(res.Committed-rec.confirm.count.Load(), 0)
	res.Batches = r.stats.snapshot()
	return nil
}

// awaitConfirmed waits (within max(10 s, --duration)) for the relays to
// confirm the committed messages, so slow ones count, and with --consume
// for the consumer to receive what was confirmed.
func (r *steadyRun) awaitConfirmed(ctx context.Context, committed int64) error {
	o, rec := r.b.o, r.rec
	giveUp := time.NewTimer(max(10*time.Second, o.duration))
	defer giveUp.Stop()
	for rec.confirm.count.Load() < committed {
		select {
		case <-giveUp.C:
			fmt.Fprintf(r.b.stderr, "%s: gave up waiting for %s unconfirmed messages\n", r.label, commas(committed-rec.confirm.count.Load()))
		case err := <-r.rs.failed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-r.tick.C:
			r.progress("draining")
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
				fmt.Fprintf(r.b.stderr, "%s: gave up waiting for the consumer to receive %s confirmed messages\n", r.label, commas(rec.confirm.count.Load()-rec.receipt.count.Load()))
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

// plot draws the run's latency percentile curves and its backlog over
// time into --plot.
func (r *steadyRun) plot(res *steadyResult) error {
	b, o, rec := r.b, r.b.o, r.rec
	curves := []curve{
		rec.confirm.lat.curve("intended send → confirmed", "#d62728"),
		rec.confirm.c2.curve("commit → confirmed", "#1f77b4"),
	}
	if o.consume {
		curves = append(curves,
			rec.receipt.lat.curve("intended send → received", "#ff7f0e"),
			rec.receipt.c2.curve("commit → received", "#2ca02c"))
	}
	title := fmt.Sprintf("outbox bench steady: %s msg/s target, %s achieved", commas(int64(o.rate)), commas(int64(res.AchievedRate)))
	subtitle := fmt.Sprintf("%s → %s; %d relay(s), %d producer clients", b.d, b.dest.name, o.relays, o.clientList[0])
	return writePlot(o.plot, title, subtitle, curves, r.backlog)
}

// produce is one producer client: it takes the next slot, waits for its
// intended send time and commits a business row and its message in one
// transaction, until the slots run out or ctx ends.
func (r *steadyRun) produce(ctx context.Context) {
	b := r.b
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		slot := r.next.Add(1) - 1
		if slot >= r.slots {
			return
		}
		intended := r.start.Add(time.Duration(float64(slot) * r.interval))
		if d := time.Until(intended); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if d < -time.Millisecond {
			r.late.Add(1)
		}
		msg := b.message(r.topic, slot)
		msg.Headers = map[string]string{
			headerSlot:     strconv.FormatInt(slot, 10),
			headerIntended: strconv.FormatInt(intended.UnixNano(), 10),
		}
		err := b.conn.inTx(ctx, func(ctx context.Context, tx txn) error {
			if err := tx.exec(ctx, r.insert, r.payload); err != nil {
				return err
			}
			_, err := tx.enqueue(ctx, true, []outbox.Message{msg})
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				r.errOnce.Do(func() { r.firstErr = fmt.Errorf("%s: producer: %w", r.label, err) })
			}
			r.cancel()
			return
		}
		r.rec.committed(slot, time.Now())
		r.committed.Add(1)
		if slot >= r.firstSlot {
			r.measured.Add(1)
		}
	}
}
