package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox/internal/msgcheck"
	"github.com/txoutbox/outbox/internal/store"
)

// DefaultMetricsInterval is how often a relay samples the table for its
// gauges (pending and dead counts, oldest pending and oldest due ages) and
// for the backlog alert.
const DefaultMetricsInterval = 15 * time.Second

// Values of the result label of outbox_published_total.
const (
	resultSent     = "sent"     // the destination confirmed it
	resultRetry    = "retry"    // the attempt failed and counts; another follows after a backoff
	resultDead     = "dead"     // it will not be sent again
	resultDeferred = "deferred" // put back without counting an attempt (route down or held, or a call of new messages all failing)
)

// maxTopicSeries bounds the distinct topic label values a relay reports;
// further topics are reported as otherTopic. Topics are usually a fixed
// set of event types; the cap keeps a producer that puts ids into topics
// from flooding the metrics.
const maxTopicSeries = 256

// otherTopic is the topic label of topics beyond maxTopicSeries. It is not
// a valid topic, so it cannot clash with one.
const otherTopic = "(other)"

// invalidTopic is the topic label of rows whose topic is not a valid
// topic (written with plain SQL; they go dead without being published).
const invalidTopic = "(invalid)"

// noRoute is the route label of messages no route matches.
const noRoute = "(none)"

// relayMetrics is a relay's Prometheus collectors. Label children are
// resolved once per route and per topic, so the delivery path only adds to
// counters.
type relayMetrics struct {
	published  *prometheus.CounterVec
	dead       *prometheus.CounterVec
	pending    prometheus.Gauge
	deadRows   prometheus.Gauge
	oldest     prometheus.Gauge
	oldestDue  prometheus.Gauge
	latency    prometheus.Histogram
	publishDur *prometheus.HistogramVec
	batch      prometheus.Histogram
	readDur    prometheus.Histogram
	settleDur  prometheus.Histogram
	owned      prometheus.Gauge
	circuit    *prometheus.GaugeVec
	dbErrors   *prometheus.CounterVec
	expired    prometheus.Counter

	mu     sync.RWMutex
	topics map[string]*topicMetrics // by topic
	other  map[string]*topicMetrics // by route name, for topics past the cap
}

// topicMetrics are the counters of one route and topic.
type topicMetrics struct {
	sent, retry, dead, deferred prometheus.Counter
	deadTotal                   prometheus.Counter
}

// newRelayMetrics registers the relay's collectors on reg. A collector
// that is already registered there by another relay is shared: counters
// and histograms then add up both relays' work, and outbox_owned_partitions
// and outbox_circuit_open are kept as sums too (each relay adds and removes
// its own share).
func newRelayMetrics(reg prometheus.Registerer) (*relayMetrics, error) {
	m := &relayMetrics{topics: map[string]*topicMetrics{}, other: map[string]*topicMetrics{}}
	var errs []error
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels), &errs)
	}
	gauge := func(name, help string) prometheus.Gauge {
		return register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}), &errs)
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}), &errs)
	}
	m.published = counterVec("outbox_published_total",
		"Publish outcomes recorded by the relay, by route, topic and result (sent, retry, dead, deferred).", "route", "topic", "result")
	m.dead = counterVec("outbox_dead_total", "Messages the relay moved to dead, by route and topic.", "route", "topic")
	m.pending = gauge("outbox_pending_messages", "Pending messages in the outbox table, sampled.")
	m.deadRows = gauge("outbox_dead_messages", "Dead messages in the outbox table, sampled.")
	m.oldest = gauge("outbox_oldest_pending_age_seconds",
		"Age of the oldest pending message since its created_at, by database time, sampled; 0 when none is pending. A delayed or requeued message counts from its creation.")
	m.oldestDue = gauge("outbox_oldest_due_age_seconds",
		"How long the pending message that fell due first (available_at reached) has been waiting, by database time, sampled; 0 when none is due. What backlog alerts should watch.")
	m.latency = histogram("outbox_delivery_latency_seconds",
		"Time from a message's created_at (database time of the enqueuing transaction) to the destination's confirmation.",
		[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600})
	m.publishDur = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "outbox_publish_duration_seconds",
		Help:    "Duration of one publish call (a batch of one route) until every result was known.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30},
	}, []string{"route"}), &errs)
	m.batch = histogram("outbox_batch_size", "Messages read per non-empty round.",
		[]float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000})
	dbBuckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}
	m.readDur = histogram("outbox_read_duration_seconds", "Duration of the statement reading a round's batch.", dbBuckets)
	m.settleDur = histogram("outbox_settle_duration_seconds", "Duration of recording a round's outcomes, retries included.", dbBuckets)
	m.owned = gauge("outbox_owned_partitions", "Partitions the relay holds.")
	m.circuit = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "outbox_circuit_open",
		Help: "Route health: 1 while the route is down (its destination fails every delivery; only probes are sent), 0 while it is up.",
	}, []string{"route"}), &errs)
	m.dbErrors = counterVec("outbox_database_errors_total",
		"Failed statements of the relay on its database, by what they were for (class: read, settle, mark, lease, sample, other); /readyz fails while rounds or lease renewals keep failing.", "class")
	m.expired = register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_expired_total",
		Help: "Messages the relay moved to expired: their expires_at came before they were delivered."}), &errs)
	for _, class := range []string{dbRead, dbSettle, dbMark, dbLease, dbSample} {
		m.dbErrors.WithLabelValues(class).Add(0)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("outbox: RelayConfig.Metrics: %w", errs[0])
	}
	return m, nil
}

// register registers c on reg, or returns the equal collector already
// registered there.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errs *[]error) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	*errs = append(*errs, err)
	return c
}

// route prepares the per-route children: the route-health gauge starts
// at 0 so the series exists before the first outage.
func (m *relayMetrics) route(rs *routeState) {
	rs.publishDur = m.publishDur.WithLabelValues(labelValue(rs.name))
	rs.health.gauge = m.circuit.WithLabelValues(labelValue(rs.name))
	rs.health.gauge.Add(0)
}

// topic returns the counters of topic on route (nil: no route); past
// maxTopicSeries topics, the route's counters for otherTopic.
func (m *relayMetrics) topic(rs *routeState, topic string) *topicMetrics {
	route := noRoute
	if rs != nil {
		route = rs.name
	}
	if !msgcheck.Topic(topic) {
		topic = invalidTopic
	}
	m.mu.RLock()
	tm := m.topics[topic]
	if tm == nil && len(m.topics) >= maxTopicSeries {
		tm = m.other[route]
	}
	m.mu.RUnlock()
	if tm != nil {
		return tm
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if tm = m.topics[topic]; tm != nil {
		return tm
	}
	if len(m.topics) < maxTopicSeries {
		tm = m.newTopic(route, topic)
		m.topics[topic] = tm
		return tm
	}
	if tm = m.other[route]; tm == nil {
		tm = m.newTopic(route, otherTopic)
		m.other[route] = tm
	}
	return tm
}

func (m *relayMetrics) newTopic(route, topic string) *topicMetrics {
	route, topic = labelValue(route), labelValue(topic)
	return &topicMetrics{
		sent:      m.published.WithLabelValues(route, topic, resultSent),
		retry:     m.published.WithLabelValues(route, topic, resultRetry),
		dead:      m.published.WithLabelValues(route, topic, resultDead),
		deferred:  m.published.WithLabelValues(route, topic, resultDeferred),
		deadTotal: m.dead.WithLabelValues(route, topic),
	}
}

// labelValue makes s fit for a Prometheus label value, which must be valid
// UTF-8 (WithLabelValues panics otherwise): every label value the relay
// reports passes through it.
func labelValue(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// dbClock estimates the database's clock from a sample of it and the local
// monotonic clock, so that latencies measured against created_at do not
// depend on the host's clock agreeing with the database's.
type dbClock struct {
	sample atomic.Pointer[clockSample]
}

type clockSample struct {
	db    time.Time // the database's clock
	local time.Time // the local clock (with its monotonic reading) at that moment
}

// set records that the database read db at some moment between start and
// end on the local clock.
func (c *dbClock) set(db, start, end time.Time) {
	c.sample.Store(&clockSample{db: db, local: start.Add(end.Sub(start) / 2)})
}

// at is the database time at local time t; the local clock until a sample
// exists.
func (c *dbClock) at(t time.Time) time.Time {
	s := c.sample.Load()
	if s == nil {
		return t
	}
	return s.db.Add(t.Sub(s.local))
}

// sampleLoop samples the gauges every MetricsInterval until ctx is done.
func (r *Relay) sampleLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.MetricsInterval)
	defer t.Stop()
	failing := false
	for {
		err := r.sample(ctx)
		if err != nil && ctx.Err() == nil {
			r.dbCount(dbSample)
		}
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			r.log.Warn("outbox relay: sampling the outbox table for metrics failed", "relay", r.id, "err", err)
		case err == nil && failing:
			failing = false
			r.log.Info("outbox relay: sampling the outbox table recovered", "relay", r.id)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample takes one sample of the table and hands it to the gauges and the
// alerts.
func (r *Relay) sample(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, max(r.cfg.MetricsInterval, 5*time.Second))
	defer cancel()
	start := time.Now()
	g, err := r.store.Gauges(sctx)
	if err != nil {
		return err
	}
	r.clock.set(g.Now, start, time.Now())
	if m := r.metrics; m != nil {
		m.pending.Set(float64(g.Pending))
		m.deadRows.Set(float64(g.Dead))
		m.oldest.Set(g.OldestPendingAge.Seconds())
		m.oldestDue.Set(g.OldestDueAge.Seconds())
	}
	if r.alerts != nil {
		r.alerts.pendingAge(g.OldestDueAge, g.OldestPendingAge, g.Pending)
	}
	return nil
}

// observe records a settled round's outcomes in the metrics.
func (m *relayMetrics) observe(items []*item, clock *dbClock) {
	var last *topicMetrics
	lastTopic := ""
	for _, it := range items {
		tm := last
		if tm == nil || it.row.Topic != lastTopic {
			tm = m.topic(it.route, it.row.Topic)
			last, lastTopic = tm, it.row.Topic
		}
		switch {
		case it.out.Status == store.StatusSent:
			tm.sent.Inc()
			if !it.row.CreatedAt.IsZero() { // zero: unknown (see plausibleCreatedAt)
				m.latency.Observe(max(clock.at(it.confirmed).Sub(it.row.CreatedAt).Seconds(), 0))
			}
		case it.out.Status == store.StatusDead:
			tm.dead.Inc()
			tm.deadTotal.Inc()
		case it.out.CountAttempt:
			tm.retry.Inc()
		default:
			tm.deferred.Inc()
		}
	}
}

// MetricNames lists the names of the series a relay exports, built by the
// same constructor a relay uses: every collector's name, and for
// histograms their _bucket, _sum and _count series. Dashboards and alert
// rules are checked against it.
func MetricNames() ([]string, error) {
	rec := &recordingRegisterer{}
	if _, err := newRelayMetrics(rec); err != nil {
		return nil, err
	}
	var names []string
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 8)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			name := descName(d)
			names = append(names, name)
			switch c.(type) {
			case prometheus.Histogram, *prometheus.HistogramVec:
				names = append(names, name+"_bucket", name+"_sum", name+"_count")
			}
		}
	}
	return names, nil
}

// recordingRegisterer keeps what is registered on it.
type recordingRegisterer struct{ collectors []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

// descName is a descriptor's fully-qualified name, which Desc shows only
// in its String form: `Desc{fqName: "name", …}`.
func descName(d *prometheus.Desc) string {
	s := d.String()
	_, rest, _ := strings.Cut(s, `fqName: "`)
	name, _, _ := strings.Cut(rest, `"`)
	return name
}
