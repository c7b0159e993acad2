package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/store"
)

// Relay is the engine behind outbox.Relay: it owns partitions, reads
// their ready rows, publishes them through the routes and settles the
// outcomes. Build one with New and call Run.
type Relay struct {
	cfg     Config
	id      string
	log     *slog.Logger
	backend *store.Backend
	store   Store
	router  router

	own  ownership
	gate *gate
	// routes are the route patterns as the heartbeat records them; peers
	// what the last heartbeat told of the other relays (see unrouted).
	routes string
	peers  peers
	wakes  []chan struct{} // one per worker
	// isolating is held by a round that publishes suspects (see isolate),
	// so the suspects in flight when the process dies are one group.
	isolating sync.Mutex
	bg        sync.WaitGroup
	running   atomic.Bool
	// activity counts rounds that read messages or failed, and wake-ups:
	// the lease loop renews less often while it stands still.
	activity atomic.Int64
	// lapsedAt is when a round first found the leases it holds expired
	// (UnixNano), 0 while they are valid: see noteLeases.
	lapsedAt atomic.Int64

	// carry is worker 0's settle held for its next read (see carried).
	carry carry

	metrics *relayMetrics // nil without Config.Metrics
	alerts  *alerter      // nil without Config.Alerts
	tracer  trace.Tracer
	clock   dbClock
	owned   int // partitions counted in outbox_owned_partitions

	// db is what Ready reports (see dbhealth.go).
	db dbHealth

	// probe is the change probe's state (see probe.go).
	probe probeState

	// snap is the snapshot read's state; nil for a table read.
	snap *snapState
}

// worker is one read-publish-settle loop over its share of the owned
// partitions (see gate), or over all of them in a solo round.
type worker struct {
	index     int
	batchSize int
	wake      chan struct{}
	// solo: this round reads every owned partition (see gate).
	solo bool
	// counts are the rows a solo round read per partition.
	counts map[int]int
	// page are the cursors of a snapshot read's round, applied once it
	// is settled (see advanceCursors).
	page []store.SnapshotCursor
	// delivered are the partitions the snapshot read gave rows from.
	delivered map[int]bool
}

// routeState is a route with its health and limits.
type routeState struct {
	Route
	name   string
	health *health
	// checkFails counts the route Checker's failures in a row: each waits
	// twice as long as the one before (checkAgainAfter), until one answers.
	checkFails atomic.Int32

	publishDur prometheus.Observer // nil without metrics
}

// New returns a relay over backend. cfg must be valid and complete (the
// facade validates it and fills in the defaults); New only reads the
// failpoints (in builds that have them) and registers the metrics.
func New(backend *store.Backend, cfg Config) (*Relay, error) {
	if err := failpoint.FromEnv(); err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:     cfg,
		id:      cfg.ID,
		log:     cfg.Logger,
		backend: backend,
		store:   cfg.Store,
	}
	if r.store == nil {
		// The reads leave out payloads the relay would refuse as too
		// large, so that it never loads them (see Row.Oversize).
		r.store = backend.Store.WithPayloadLimit(cfg.MaxPayloadBytes)
	}
	r.carry.sr = settleReaderOf(r.store)
	for range cfg.Workers {
		r.wakes = append(r.wakes, make(chan struct{}, 1))
	}
	r.gate = newGate(cfg.Workers)
	if r.id == "" {
		r.id = defaultRelayID()
	}
	r.router.cache = map[string]*routeState{}
	r.routes = routePatterns(cfg.Routes)
	for _, rt := range cfg.Routes {
		rs := &routeState{Route: rt, name: rt.Name, health: newHealth(rt)}
		if rs.name == "" {
			rs.name = rt.Pattern
		}
		r.router.routes = append(r.router.routes, rs)
	}
	r.tracer = newTracer(cfg.TracerProvider)
	if cfg.Metrics != nil {
		m, err := newRelayMetrics(cfg.Metrics)
		if err != nil {
			return nil, err
		}
		r.metrics = m
		r.db.errors = m.dbErrors
		for _, rs := range r.router.routes {
			m.route(rs)
		}
	}
	if cfg.Alerts != nil {
		r.alerts = newAlerter(*cfg.Alerts, r.id, r.log)
		r.alerts.database = cfg.Database
	}
	return r, nil
}

// DefaultID is a new relay instance id: host-pid-random.
func DefaultID() string { return defaultRelayID() }

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
	r.activity.Add(1)
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
		if ctx.Err() != nil {
			return nil // stopped before it started: nothing to finish or release
		}
		return fmt.Errorf("outbox: relay start: %w (has `outbox migrate` been run?)", err)
	}
	if partitions == 0 {
		return errors.New("outbox: relay start: outbox_leases is empty (has `outbox migrate` been run?)")
	}
	if err := r.store.CheckSchema(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("outbox: relay start: %w", err)
	}
	if err := r.checkSnapshotRead(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("outbox: relay start: %w", err)
	}
	r.log.Info("outbox relay: started", "relay", r.id, "partitions", partitions, "routes", len(r.router.routes))
	r.startBudgets(ctx)
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
	r.startProbe(loopCtx)
	r.startObserving(loopCtx)
	r.startExpiring(loopCtx)

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
	if err := r.saveCursors(finish, nil); err != nil {
		r.log.Warn("outbox relay: recording where the snapshot read stands failed; the next owner reads the last rounds again", "relay", r.id, "err", err)
	}
	if err := r.store.DropRelay(finish, r.id); err != nil {
		r.log.Warn("outbox relay: releasing partitions on shutdown failed; they move when the leases expire", "relay", r.id, "err", err)
	}
	r.reportOwned(0)
	r.log.Info("outbox relay: stopped", "relay", r.id)
	return nil
}

// listenLoop turns database notifications into wake-ups, reconnecting
// with backoff. A connection that never receives the listener's own
// check signal (a pooler in transaction mode) is said once, at warning
// level, and checked again every noSignalsRetry; meanwhile the relay
// polls.
func (r *Relay) listenLoop(ctx context.Context) {
	delay := 100 * time.Millisecond
	warned := false
	for ctx.Err() == nil {
		start := time.Now()
		r.listening(true)
		err := r.backend.Listen(ctx, r.listenWake)
		r.listening(false)
		if ctx.Err() != nil {
			return
		}
		wait := delay
		switch {
		case errors.Is(err, driver.ErrNoSignals):
			r.setNoSignals(true)
			if !warned {
				r.log.Warn("outbox relay: LISTEN cannot work over this database connection: "+err.Error()+
					"; the relay polls instead (at most max_poll_interval apart); for wake-ups, give it a LISTEN connection straight to the server (outbox relay --listen-db URL, RelayConfig.Listener)",
					"relay", r.id, "max_poll_interval", r.cfg.MaxPollInterval)
				warned = true
			}
			wait = noSignalsRetry
		default:
			r.setNoSignals(false)
			if time.Since(start) > time.Minute {
				delay = 100 * time.Millisecond
			}
			r.log.Debug("outbox relay: listen connection lost; polling meanwhile", "relay", r.id, "err", err)
			delay = min(delay*2, 10*time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// noSignalsRetry is how long a relay whose listening connection got no
// signals polls before it checks that connection again.
const noSignalsRetry = 5 * time.Minute
