package outbox

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/seal"
)

// Relay defaults.
const (
	// DefaultBatchSize is the most messages a relay reads in one round (1000).
	DefaultBatchSize = relay.DefaultBatchSize
	// DefaultMinBatchSize is where the adaptive batch size starts and the
	// smallest it shrinks to (50).
	DefaultMinBatchSize = relay.DefaultMinBatchSize
	// DefaultMinPollInterval is the shortest wait between reads that found
	// nothing (5 ms).
	DefaultMinPollInterval = relay.DefaultMinPollInterval
	// DefaultMaxPollInterval is the longest wait between reads when idle (1 s).
	DefaultMaxPollInterval = relay.DefaultMaxPollInterval
	// DefaultProbeInterval is how often an idle relay asks the database
	// whether a row was added (25 ms; see RelayConfig.ProbeInterval).
	DefaultProbeInterval = relay.DefaultProbeInterval
	// DefaultPublishTimeout bounds one publish of a batch (15 s).
	DefaultPublishTimeout = relay.DefaultPublishTimeout
	// DefaultShutdownTimeout bounds the finishing of the in-flight batch
	// after Run's context is cancelled (10 s).
	DefaultShutdownTimeout = relay.DefaultShutdownTimeout
	// DefaultWorkers is how many rounds a relay runs at once (4).
	DefaultWorkers = relay.DefaultWorkers
	// DefaultMetricsInterval is how often a relay samples the table for
	// its gauges (pending and dead counts, oldest pending and oldest due
	// ages) and for the backlog alert (15 s).
	DefaultMetricsInterval = relay.DefaultMetricsInterval
	// DefaultLeaseTTL is how long a relay's ownership of a partition lasts
	// without renewal; a relay that dies is replaced after at most this (5 s).
	DefaultLeaseTTL = relay.DefaultLeaseTTL
	// DefaultNoRouteGrace is how long a message whose topic no route of
	// its relay matches waits while another live relay may route it (10 min).
	DefaultNoRouteGrace = relay.DefaultNoRouteGrace
)

// BatchReport describes one settled round of a relay.
type BatchReport struct {
	// Read is how many messages the round read.
	Read int
	// Sent, Retried, Dead and Deferred count the outcomes written; Skipped
	// counts messages left untouched for a later round (held back behind
	// an earlier message of their key, or cut off by shutdown).
	Sent, Retried, Dead, Deferred, Skipped int
	// Settled is how many rows the settle statement changed; less than
	// Sent+Retried+Dead+Deferred when the relay lost a partition mid-round.
	Settled int64
	// BatchSize is the adaptive read limit used.
	BatchSize int
}

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Routes map topics to publishers; the first match wins. Required.
	Routes []Route
	// ID names this relay instance in the lease table and logs. Defaults
	// to host-pid-random.
	ID string
	// Logger receives state changes (dead letters, partitions gained or
	// lost, routes down or up again). Defaults to slog.Default().
	Logger *slog.Logger
	// BatchSize is the most messages a worker reads in one round; each
	// worker adapts between MinBatchSize and BatchSize. Defaults to
	// DefaultBatchSize.
	BatchSize int
	// Workers is how many read-publish-settle rounds run at once, each over
	// its own share of the owned partitions (partition mod Workers), so one
	// round's publishing overlaps another's database work. Per-key order
	// holds: a key lives in one partition. Defaults to DefaultWorkers (4).
	Workers int
	// MinBatchSize is where the batch size starts and the least it shrinks
	// to. Defaults to DefaultMinBatchSize (or BatchSize if smaller).
	MinBatchSize int
	// MinPollInterval is the first wait after a read that found nothing;
	// it doubles up to MaxPollInterval while the table stays empty, and any
	// wake-up resets it. Defaults to DefaultMinPollInterval (5 ms).
	MinPollInterval time.Duration
	// MaxPollInterval is the longest idle wait. Defaults to
	// DefaultMaxPollInterval (1 s).
	MaxPollInterval time.Duration
	// ProbeInterval is how often the relay asks the database for the
	// table's highest id (one primary-key lookup) and reads as soon as it
	// moved: a row from any producer (plain SQL, another language, an
	// adopted table's application; PostgreSQL, MySQL/MariaDB, SQLite) is
	// found within about this long, where the reads alone back off to
	// MaxPollInterval. Negative: no probe, new rows wait for a poll or a
	// Go producer's signal. Defaults to DefaultProbeInterval (25 ms).
	ProbeInterval time.Duration
	// PublishTimeout bounds one publish call; results not confirmed by
	// then are unknown outcomes. Defaults to DefaultPublishTimeout (15 s).
	PublishTimeout time.Duration
	// ShutdownTimeout bounds how long Run spends finishing its in-flight
	// batch once its context is cancelled; messages still unconfirmed are
	// left pending for the next owner. Defaults to DefaultShutdownTimeout
	// (10 s).
	ShutdownTimeout time.Duration
	// LeaseTTL is how long partition ownership lasts without renewal
	// (renewed every LeaseTTL/5). A relay that dies is replaced after at
	// most LeaseTTL. Defaults to DefaultLeaseTTL (5 s).
	LeaseTTL time.Duration
	// Retry is the backoff between attempts, unless a route overrides it.
	// Defaults to the curve of the zero RetryPolicy: about 1 s after the
	// first failure, then 32 s, 4 min, … up to 16.4 h, 25.2 h to 33.6 h
	// over the default 10 attempts.
	Retry RetryPolicy
	// MaxRetryAge bounds a message's retrying by its age as well as by
	// its max_attempts, whichever comes first: a failure finding the
	// message older than this since its created_at (database time), or
	// whose next retry would fall past it, makes it dead with "retry
	// budget (D) spent after N attempts: …". A message whose created_at
	// is unknown is bounded by its attempts only; a route's own
	// MaxRetryAge wins. The horizon a consumer's dedupe window must cover
	// is then at most this (docs/consumers.md). Defaults to 0: attempts
	// only.
	MaxRetryAge time.Duration
	// MaxAge expires a message older than this (since its enqueue, by the
	// database's clock) when it would be published, on every route
	// without a MaxAge of its own (see Route.MaxAge). Defaults to 0:
	// messages expire only by their own expires_at.
	MaxAge time.Duration
	// SnapshotRead reads a PostgreSQL outbox by transaction snapshots,
	// and writes nothing for a message it delivered: the message keeps
	// status pending, and its partition's read cursor, past it, records
	// the delivery (docs/snapshot-read.md). The database needs `outbox
	// migrate --read-path snapshot` first, and then every relay on it
	// needs SnapshotRead: a relay whose read does not match the
	// database's refuses to start.
	SnapshotRead bool
	// MaxPayloadBytes: a message with a larger payload (inserted by plain
	// SQL) goes dead instead of being published. Defaults to
	// DefaultMaxPayloadBytes (1 MiB).
	MaxPayloadBytes int
	// NoRouteGrace bounds how long a message whose topic no route of this
	// relay matches waits, pending and uncharged, while another live relay
	// on the database routes the topic (or records no routes: an earlier
	// version): relays whose routes differ — a rolling deploy that adds a
	// route — do not dead-letter each other's messages. When no other live
	// relay routes the topic the message is dead at once, "no route for
	// topic …". Defaults to DefaultNoRouteGrace (10 min).
	NoRouteGrace time.Duration
	// OnBatch, when set, is called after every settled round, from the
	// workers' goroutines (concurrently when Workers > 1), once the
	// round's outcomes are written: on PostgreSQL a small round's are
	// written with the next read, so its report comes then. Keep it fast.
	OnBatch func(BatchReport)
	// Listener, when set, is where the relay LISTENs for the producers'
	// signals instead of over its own driver: a driver over a pool
	// straight to the PostgreSQL server (outboxpgx.New) when the relay's
	// own connections go through a pooler in transaction mode
	// (PgBouncer), where LISTEN cannot work. The relay takes one
	// connection of it for good. Defaults to nil: the driver's own.
	Listener driver.Listener
	// ChangeFeed, when set, tells the relay of commits that may have
	// added messages, so that an idle relay looks at once instead of
	// probing the table every ProbeInterval: on MySQL and MariaDB, the
	// server's binary log (outboxbinlog.New, a module of its own). While
	// it follows them, the relay probes only on a change (at most every
	// ProbeInterval) and once a second; when it cannot (no binary log, an
	// account without replication rights) or loses them, the relay says
	// so, probes every ProbeInterval, and tries again. Ignored when
	// ProbeInterval is negative. Defaults to nil: the driver's own
	// (driver.ChangeFeed), if any.
	ChangeFeed driver.ChangeFeed
	// Retention removes (or archives) settled messages once they are old
	// enough; see RetentionConfig. Defaults to nil: on, with the
	// RetentionConfig defaults (sent 24 h, dead 14 days).
	Retention *RetentionConfig
	// Metrics, when set, is where the relay registers its Prometheus
	// metrics (outbox_published_total, outbox_pending_messages, …; see
	// docs/operations.md). NewRelay fails if registering fails. Defaults
	// to nil: no metrics are collected.
	//
	// Relays sharing one registerer share its collectors: counters add up
	// and the table gauges are the same figure. Relays over different
	// databases need registerers told apart, e.g. with
	// prometheus.WrapRegistererWith.
	Metrics prometheus.Registerer
	// MetricsInterval is how often the relay samples the outbox table for
	// the gauges (pending and dead counts, oldest pending and oldest due
	// ages) and the backlog alert. Defaults to DefaultMetricsInterval (15 s).
	MetricsInterval time.Duration
	// TracerProvider makes the relay's spans: one "send" span per publish
	// attempt, a child of the producer's span when the message carries a
	// traceparent, whose context replaces traceparent and tracestate on
	// the wire so consumers continue under it. Defaults to nil: the
	// OpenTelemetry global provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// Alerts, when set, sends alerts about new dead letters and a growing
	// backlog to a webhook and the log. Defaults to nil: no alerts.
	Alerts *AlertConfig
	// Keys open payloads sealed at enqueue (package seal) on routes that
	// open them (Route.Sealed). A message whose key the provider reports
	// erased is dead "erased: key K no longer exists", its attempts
	// uncharged; one it does not know, or that fails to open, is dead
	// "cannot open sealed payload: …". Defaults to nil: routes passing
	// sealed payloads on (SealedPass) deliver them; on any other route a
	// sealed message is dead.
	Keys seal.KeyProvider
	// ClaimCheck is the blob store of payloads kept out of the table at
	// enqueue (ClaimCheckConfig): routes fetch them from it
	// (Route.ClaimCheck), and the relay that runs retention removes its
	// orphans — blobs no row of outbox_messages or
	// outbox_messages_archive references (rolled-back transactions, rows
	// retention or an operator removed) — once older than
	// ClaimCheckGrace. Defaults to nil: routes passing references on
	// (ClaimReference) deliver them; on any other route a claim-checked
	// message is dead.
	ClaimCheck claimcheck.Store
	// ClaimCheckGrace is how old a blob without a row must be before the
	// orphan sweep removes it: longer than any producer's transaction
	// stays open. Negative: no sweep. Defaults to DefaultClaimCheckGrace
	// (1 h).
	ClaimCheckGrace time.Duration
}

// engine maps the configuration onto the engine's as given: Check and
// SetDefaults work on the result.
func (c *RelayConfig) engine() relay.Config {
	e := relay.Config{
		ID:              c.ID,
		Logger:          c.Logger,
		BatchSize:       c.BatchSize,
		Workers:         c.Workers,
		MinBatchSize:    c.MinBatchSize,
		MinPollInterval: c.MinPollInterval,
		MaxPollInterval: c.MaxPollInterval,
		ProbeInterval:   c.ProbeInterval,
		PublishTimeout:  c.PublishTimeout,
		ShutdownTimeout: c.ShutdownTimeout,
		LeaseTTL:        c.LeaseTTL,
		Retry:           relay.RetryPolicy(c.Retry),
		MaxRetryAge:     c.MaxRetryAge,
		MaxAge:          c.MaxAge,
		SnapshotRead:    c.SnapshotRead,
		MaxPayloadBytes: c.MaxPayloadBytes,
		NoRouteGrace:    c.NoRouteGrace,
		Retention:       c.Retention.engine(),
		Metrics:         c.Metrics,
		MetricsInterval: c.MetricsInterval,
		TracerProvider:  c.TracerProvider,
		Alerts:          (*relay.AlertConfig)(c.Alerts),
		Keys:            c.Keys,
		ClaimCheck:      c.ClaimCheck,
		ClaimCheckGrace: c.ClaimCheckGrace,
	}
	if f := c.OnBatch; f != nil {
		e.OnBatch = func(b relay.BatchReport) { f(BatchReport(b)) }
	}
	for _, rt := range c.Routes {
		er := relay.Route{
			Pattern:       rt.Pattern,
			Destination:   rt.Destination,
			Name:          rt.Name,
			Retry:         (*relay.RetryPolicy)(rt.Retry),
			MaxInFlight:   rt.MaxInFlight,
			Rate:          rt.Rate,
			ProbeMin:      rt.ProbeMin,
			ProbeMax:      rt.ProbeMax,
			MaxRetryAfter: rt.MaxRetryAfter,
			MaxRetryAge:   rt.MaxRetryAge,
			MaxAge:        rt.MaxAge,
			Sealed:        rt.Sealed,
			ClaimCheck:    rt.ClaimCheck,
		}
		er.SetPublisher(rt.Publisher, rt.Checker)
		e.Routes = append(e.Routes, er)
	}
	return e
}
