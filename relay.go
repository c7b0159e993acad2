package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/store"
)

// Relay moves committed messages from the outbox table to their
// destinations. Build one with NewRelay and call Run.
type Relay struct {
	cfg     RelayConfig
	id      string
	log     *slog.Logger
	backend *store.Backend
	store   *store.Store
	router  router

	own   ownership
	wakes []chan struct{} // one per worker
	// isolating is held by a round that publishes suspects (see isolate),
	// so the suspects in flight when the process dies are one group.
	isolating sync.Mutex
	bg        sync.WaitGroup
	running   atomic.Bool

	metrics *relayMetrics // nil without RelayConfig.Metrics
	alerts  *alerter      // nil without RelayConfig.Alerts
	tracer  trace.Tracer
	clock   dbClock
	owned   int // partitions counted in outbox_owned_partitions
}

// worker is one read-publish-settle loop over its share of the owned
// partitions (those with partition % Workers == index).
type worker struct {
	index     int
	batchSize int
	wake      chan struct{}
}

// routeState is a route with its circuit breaker.
type routeState struct {
	Route
	name    string
	checker Checker

	mu        sync.Mutex
	openUntil time.Time
	pauses    int
	lastErr   string

	publishDur prometheus.Observer // nil without metrics
	circuit    prometheus.Gauge    // nil without metrics
}

// NewRelay returns a relay reading through driver's database. The driver's
// transaction type does not matter to the relay.
func NewRelay[TTx any](driver Driver[TTx], cfg *RelayConfig) (*Relay, error) {
	if driver == nil {
		return nil, errors.New("outbox: NewRelay: nil driver")
	}
	if cfg == nil {
		return nil, errors.New("outbox: NewRelay: nil config")
	}
	if err := failpoint.FromEnv(); err != nil {
		return nil, err
	}
	c := *cfg
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := c.Retention.validate(); err != nil {
		return nil, err
	}
	c.setDefaults()
	r := &Relay{
		cfg:     c,
		id:      c.ID,
		log:     c.Logger,
		backend: driver.Backend(),
	}
	for range c.Workers {
		r.wakes = append(r.wakes, make(chan struct{}, 1))
	}
	r.store = r.backend.Store
	if r.id == "" {
		r.id = defaultRelayID()
	}
	r.router.cache = map[string]*routeState{}
	for _, rt := range c.Routes {
		rs := &routeState{Route: rt, name: rt.Name, checker: rt.Checker}
		if rs.name == "" {
			rs.name = rt.Pattern
		}
		if rs.checker == nil {
			rs.checker, _ = rt.Publisher.(Checker)
		}
		r.router.routes = append(r.router.routes, rs)
	}
	r.tracer = newTracer(c.TracerProvider)
	if c.Metrics != nil {
		m, err := newRelayMetrics(c.Metrics)
		if err != nil {
			return nil, err
		}
		r.metrics = m
		for _, rs := range r.router.routes {
			m.route(rs)
		}
	}
	if c.Alerts != nil {
		r.alerts = newAlerter(*c.Alerts, r.id, r.log)
	}
	return r, nil
}

func defaultRelayID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "relay"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// ID is the relay's instance id.
func (r *Relay) ID() string { return r.id }

func (r *Relay) wakeSelf() {
	for _, ch := range r.wakes {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Run relays until ctx is cancelled, then finishes or releases its
// in-flight batch (within ShutdownTimeout), gives up its partitions so
// other relays take them at once, and returns nil. It returns an error
// only when it cannot start (no schema) or is already running.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("outbox: Relay.Run: already running")
	}
	defer r.running.Store(false)
	partitions, err := r.store.Partitions(ctx)
	if err != nil {
		return fmt.Errorf("outbox: relay start: %w (has `outbox migrate` been run?)", err)
	}
	if partitions == 0 {
		return errors.New("outbox: relay start: outbox_leases is empty (has `outbox migrate` been run?)")
	}
	if err := r.store.CheckSchema(ctx); err != nil {
		return fmt.Errorf("outbox: relay start: %w", err)
	}
	r.log.Info("outbox relay: started", "relay", r.id, "partitions", partitions, "routes", len(r.router.routes))
	if advice, err := r.store.ServerAdvice(ctx); err == nil {
		for _, a := range advice {
			r.log.Warn("outbox relay: "+a, "relay", r.id)
		}
	}

	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.leaseLoop(loopCtx, partitions)
	}()
	r.startRetention(ctx)
	if r.backend.Listen != nil {
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			r.listenLoop(loopCtx)
		}()
	}
	r.startObserving(loopCtx)

	var workers sync.WaitGroup
	for i := range r.cfg.Workers {
		w := &worker{index: i, batchSize: r.cfg.MinBatchSize, wake: r.wakes[i]}
		workers.Add(1)
		go func() {
			defer workers.Done()
			local, unsubscribe := r.backend.Local.Subscribe()
			defer unsubscribe()
			r.work(ctx, w, local)
		}()
	}
	workers.Wait()

	stopLoops()
	r.bg.Wait()
	finish, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.store.DropRelay(finish, r.id); err != nil {
		r.log.Warn("outbox relay: releasing partitions on shutdown failed; they move when the leases expire", "relay", r.id, "err", err)
	}
	r.reportOwned(0)
	r.log.Info("outbox relay: stopped", "relay", r.id)
	return nil
}

// listenLoop turns database notifications into wake-ups, reconnecting
// with backoff.
func (r *Relay) listenLoop(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := r.backend.Listen(ctx, r.wakeSelf)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			delay = 100 * time.Millisecond
		}
		r.log.Debug("outbox relay: listen connection lost; polling meanwhile", "relay", r.id, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
}

// work is one worker's read-publish-settle loop.
func (r *Relay) work(ctx context.Context, w *worker, local <-chan struct{}) {
	poll := r.cfg.MinPollInterval
	errDelay := 100 * time.Millisecond
	failing := false
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wait := time.Duration(0)
		n, err := r.round(ctx, w)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				r.log.Error("outbox relay: round failed; retrying", "relay", r.id, "err", err)
				failing = true
			}
			wait, errDelay = errDelay, min(errDelay*2, 5*time.Second)
		case n < 0: // nothing owned
			failing, errDelay = false, 100*time.Millisecond
			wait = r.cfg.LeaseTTL / 5
		case n == 0:
			failing, errDelay = false, 100*time.Millisecond
			wait, poll = poll, min(poll*2, r.cfg.MaxPollInterval)
		default:
			failing, errDelay = false, 100*time.Millisecond
			poll = r.cfg.MinPollInterval
		}
		if wait == 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-w.wake:
			poll = r.cfg.MinPollInterval
		case <-local:
			poll = r.cfg.MinPollInterval
		}
	}
}

// round reads one batch of w's partitions, delivers it and settles it. It
// returns how many messages it read, or -1 when w owns no partition.
func (r *Relay) round(ctx context.Context, w *worker) (int, error) {
	r.own.round.RLock()
	defer r.own.round.RUnlock()
	all, ok := r.own.snapshot()
	if !ok {
		return -1, nil
	}
	if r.router.allPaused() {
		// Every destination is down: reading would only defer the
		// batch again. The first round after a pause ends is the probe.
		return 0, nil
	}
	parts := make([]int, 0, len(all)/r.cfg.Workers+1)
	for _, p := range all {
		if p%r.cfg.Workers == w.index {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return -1, nil
	}
	readStart := time.Now()
	rctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	rows, err := r.store.Read(rctx, parts, w.batchSize)
	cancel()
	if r.metrics != nil {
		r.metrics.readDur.Observe(time.Since(readStart).Seconds())
	}
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	if len(rows) == 0 {
		w.batchSize = max(r.cfg.MinBatchSize, w.batchSize/2)
		return 0, nil
	}
	report := BatchReport{Read: len(rows), BatchSize: w.batchSize}
	if r.metrics != nil {
		r.metrics.batch.Observe(float64(len(rows)))
	}
	switch {
	case len(rows) == w.batchSize:
		w.batchSize = min(r.cfg.BatchSize, w.batchSize*2)
	case len(rows) < w.batchSize/4:
		w.batchSize = max(r.cfg.MinBatchSize, w.batchSize/2)
	}
	read := len(rows)
	rows, suspects, alone := r.isolate(rows)
	if suspects {
		r.isolating.Lock()
		defer r.isolating.Unlock()
	}
	if err := r.markInflight(ctx, parts, rows); err != nil {
		return 0, fmt.Errorf("mark in-flight: %w", err)
	}
	items := make([]*item, len(rows))
	for i := range rows {
		items[i] = r.prepare(&rows[i])
	}
	if alone {
		ok, err := r.charge(ctx, items[0])
		if err != nil {
			return 0, fmt.Errorf("charge suspect: %w", err)
		}
		if !ok {
			return read, nil
		}
	}
	if err := failpoint.Inject(failpoint.AfterReadBeforePublish); err != nil {
		return 0, err
	}
	decided := r.deliver(ctx, items, &report)
	if err := failpoint.Inject(failpoint.AfterPublishBeforeSettle); err != nil {
		return read, err
	}
	if len(decided) > 0 {
		outs := make([]store.Outcome, len(decided))
		for i, it := range decided {
			outs[i] = it.out
			if it.charged {
				outs[i].CountAttempt = false
			}
		}
		settled, err := r.settle(ctx, outs)
		report.Settled = settled
		if err != nil {
			return len(rows), fmt.Errorf("settle: %w (the batch will be delivered again)", err)
		}
		if want := int64(len(outs)); settled < want {
			r.log.Warn("outbox relay: some outcomes were not recorded: partition moved to another relay", "relay", r.id, "expected", want, "settled", settled)
		}
		r.recorded(decided)
	}
	if r.cfg.OnBatch != nil {
		r.cfg.OnBatch(report)
	}
	return read, nil
}

// markInflight records, for each of the worker's partitions, the highest
// id about to be published from it (0: none), so that a relay taking a
// partition over after a crash knows which messages may have reached
// their destination (the Checker is asked about them) or may have crashed
// the relay (see isolate).
func (r *Relay) markInflight(ctx context.Context, parts []int, rows []store.Row) error {
	maxIDs := make([]int64, len(parts))
	for _, row := range rows {
		if i := slices.Index(parts, row.Partition); i >= 0 {
			maxIDs[i] = max(maxIDs[i], row.ID)
		}
	}
	mctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	defer cancel()
	return r.store.MarkInflight(mctx, r.id, parts, maxIDs)
}

// statementTimeout bounds each of the relay's statements but the settle
// (which has its own): an answer lost in the network — a connection
// cut without a reset, a half-open path — would otherwise hold a worker
// or the lease loop forever. The relay retries on a fresh connection.
func (r *Relay) statementTimeout() time.Duration {
	return max(2*r.cfg.LeaseTTL, 5*time.Second)
}

// settle writes outcomes, retrying a failed statement while the leases
// last: a batch that was published but not recorded is delivered again.
func (r *Relay) settle(ctx context.Context, outs []store.Outcome) (int64, error) {
	if r.metrics != nil {
		defer func(start time.Time) { r.metrics.settleDur.Observe(time.Since(start).Seconds()) }(time.Now())
	}
	if err := failpoint.Inject(failpoint.BeforeSettle); err != nil {
		return 0, err
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		var n int64
		n, err = r.store.Settle(sctx, r.id, outs)
		cancel()
		if err == nil {
			return n, nil
		}
		if !r.own.valid() {
			break
		}
		time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
	}
	return 0, err
}
