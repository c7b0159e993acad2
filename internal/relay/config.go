package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/msgcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/seal"
)

// Relay defaults; outbox.DefaultBatchSize and the others are these,
// documented there.
const (
	DefaultBatchSize       = 1000
	DefaultMinBatchSize    = 50
	DefaultMinPollInterval = 5 * time.Millisecond
	DefaultMaxPollInterval = time.Second
	DefaultProbeInterval   = 25 * time.Millisecond
	DefaultPublishTimeout  = 15 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	DefaultWorkers         = 4
	DefaultLeaseTTL        = 5 * time.Second
	DefaultMaxPayloadBytes = 1 << 20
	DefaultNoRouteGrace    = 10 * time.Minute
)

// Config is a relay's configuration: outbox.RelayConfig field for field,
// over the engine's types. The facade maps the user's configuration onto
// it as given; Check then names a bad field and SetDefaults fills in the
// rest. New wants a Config on which both have been done.
type Config struct {
	Routes          []Route
	ID              string // "" is host-pid-random
	Logger          *slog.Logger
	BatchSize       int
	Workers         int
	MinBatchSize    int
	MinPollInterval time.Duration
	MaxPollInterval time.Duration
	ProbeInterval   time.Duration // negative: no change probe
	PublishTimeout  time.Duration
	ShutdownTimeout time.Duration
	LeaseTTL        time.Duration
	Retry           RetryPolicy
	// MaxRetryAge bounds a message's retrying by its age (since
	// created_at) as well as by its max_attempts; 0: no bound. A route's
	// own MaxRetryAge wins.
	MaxRetryAge time.Duration
	// MaxAge expires a message older than this (since its created_at, by
	// the database's clock) when it would be published, instead of
	// publishing it; a route's own MaxAge wins. 0: never.
	MaxAge time.Duration
	// SnapshotRead reads the outbox by transaction snapshots and writes
	// nothing for a delivered message (PostgreSQL, once the database's
	// snapshot read is enabled; see snapshot.go).
	SnapshotRead    bool
	MaxPayloadBytes int
	NoRouteGrace    time.Duration
	OnBatch         func(BatchReport) // nil: none
	Retention       *Retention        // nil: no retention
	Metrics         prometheus.Registerer
	MetricsInterval time.Duration
	TracerProvider  trace.TracerProvider // nil: the global provider
	Alerts          *AlertConfig         // nil: no alerts
	// Share, when set, bounds the rounds running at once across every
	// relay given the same channel (its capacity): the databases of a
	// fleet share their process's workers fairly.
	Share chan struct{}
	// Database names the database in alerts when the relay serves one of
	// a fleet's; "" otherwise.
	Database string
	// Keys open sealed payloads (routes in SealedOpen mode); nil: none.
	Keys seal.KeyProvider
	// ClaimCheck holds the blobs of claim-checked payloads, fetched on
	// routes in ClaimInline mode and swept of orphans by the janitor;
	// nil: none.
	ClaimCheck claimcheck.Store
	// ClaimCheckGrace is how old an unreferenced blob must be for the
	// orphan sweep to remove it; negative: no sweep. 0:
	// DefaultClaimCheckGrace.
	ClaimCheckGrace time.Duration

	// Store replaces the backend's store (tests run rounds on a fake).
	// Defaults to the backend's.
	Store Store
}

// Check names the first bad field of a configuration not yet given its
// defaults, in the words of outbox.RelayConfig: its messages are the
// API's.
func (c *Config) Check() error {
	if len(c.Routes) == 0 {
		return errors.New("outbox: RelayConfig.Routes: at least one route is required")
	}
	for i, r := range c.Routes {
		if err := r.check(fmt.Sprintf("RelayConfig.Routes[%d]", i)); err != nil {
			return err
		}
		if r.ClaimCheck == ClaimInline && c.ClaimCheck == nil {
			return fmt.Errorf("outbox: RelayConfig.Routes[%d] (%s): ClaimCheck %q fetches claim-checked payloads and RelayConfig.ClaimCheck is nil", i, r.Pattern, ClaimInline)
		}
		if r.Sealed == SealedOpen && c.Keys == nil {
			return fmt.Errorf("outbox: RelayConfig.Routes[%d] (%s): Sealed %q opens sealed payloads and RelayConfig.Keys is nil", i, r.Pattern, SealedOpen)
		}
	}
	switch {
	case c.BatchSize < 0:
		return errors.New("outbox: RelayConfig.BatchSize must not be negative")
	case c.Workers < 0 || c.Workers > 64:
		return errors.New("outbox: RelayConfig.Workers must be between 0 and 64")
	case c.MinBatchSize < 0:
		return errors.New("outbox: RelayConfig.MinBatchSize must not be negative")
	case c.MinPollInterval < 0 || c.MaxPollInterval < 0:
		return errors.New("outbox: RelayConfig poll intervals must not be negative")
	case c.PublishTimeout < 0, c.ShutdownTimeout < 0:
		return errors.New("outbox: RelayConfig timeouts must not be negative")
	case c.LeaseTTL < 0 || (c.LeaseTTL > 0 && c.LeaseTTL < 500*time.Millisecond):
		return errors.New("outbox: RelayConfig.LeaseTTL must be at least 500ms")
	case c.MaxPayloadBytes < 0:
		return errors.New("outbox: RelayConfig.MaxPayloadBytes must not be negative")
	case c.NoRouteGrace < 0:
		return errors.New("outbox: RelayConfig.NoRouteGrace must not be negative")
	case c.MaxRetryAge < 0:
		return errors.New("outbox: RelayConfig.MaxRetryAge must not be negative")
	case c.MaxAge < 0:
		return errors.New("outbox: RelayConfig.MaxAge must not be negative")
	}
	if err := c.Retry.Check("RelayConfig.Retry"); err != nil {
		return err
	}
	if c.MetricsInterval < 0 {
		return errors.New("outbox: RelayConfig.MetricsInterval must not be negative")
	}
	if c.Alerts != nil {
		if err := c.Alerts.check(); err != nil {
			return fmt.Errorf("outbox: RelayConfig.Alerts.%w", err)
		}
	}
	return c.Retention.check()
}

// check names a bad field of the route found at field (e.g.
// "RelayConfig.Routes[0]").
func (r *Route) check(field string) error {
	if err := ValidatePattern(r.Pattern); err != nil {
		return fmt.Errorf("outbox: %s: %w", field, err)
	}
	field = fmt.Sprintf("%s (%s)", field, r.Pattern)
	if r.Publisher == nil {
		return fmt.Errorf("outbox: %s: nil Publisher", field)
	}
	if r.Destination != "" && !msgcheck.Topic(r.Destination) {
		return fmt.Errorf("outbox: %s: invalid Destination %q", field, r.Destination)
	}
	switch {
	case r.MaxInFlight < 0:
		return fmt.Errorf("outbox: %s.MaxInFlight must not be negative", field)
	case r.Rate < 0:
		return fmt.Errorf("outbox: %s.Rate must not be negative", field)
	case r.ProbeMin < 0 || r.ProbeMax < 0:
		return fmt.Errorf("outbox: %s: probe intervals must not be negative", field)
	case r.ProbeMax > 0 && r.ProbeMin > r.ProbeMax:
		return fmt.Errorf("outbox: %s: ProbeMin %s is more than ProbeMax %s", field, r.ProbeMin, r.ProbeMax)
	case r.MaxRetryAfter < 0:
		return fmt.Errorf("outbox: %s.MaxRetryAfter must not be negative", field)
	case r.MaxRetryAge < 0:
		return fmt.Errorf("outbox: %s.MaxRetryAge must not be negative", field)
	case r.MaxAge < 0:
		return fmt.Errorf("outbox: %s.MaxAge must not be negative", field)
	case r.Sealed != "" && r.Sealed != SealedOpen && r.Sealed != SealedPass:
		return fmt.Errorf("outbox: %s.Sealed %q: want %q or %q", field, r.Sealed, SealedOpen, SealedPass)
	case r.ClaimCheck != "" && r.ClaimCheck != ClaimInline && r.ClaimCheck != ClaimReference:
		return fmt.Errorf("outbox: %s.ClaimCheck %q: want %q or %q", field, r.ClaimCheck, ClaimInline, ClaimReference)
	}
	if r.Retry != nil {
		return r.Retry.Check(field + ".Retry")
	}
	return nil
}

// SetDefaults fills in every field left zero of a checked configuration.
// The Alerts and Retention it points to are replaced by filled-in copies,
// so the user's are never written to.
func (c *Config) SetDefaults() {
	orDefault(&c.BatchSize, DefaultBatchSize)
	orDefault(&c.Workers, DefaultWorkers)
	orDefault(&c.MinBatchSize, DefaultMinBatchSize)
	c.MinBatchSize = min(c.MinBatchSize, c.BatchSize)
	orDefault(&c.MinPollInterval, DefaultMinPollInterval)
	orDefault(&c.MaxPollInterval, DefaultMaxPollInterval)
	orDefault(&c.ProbeInterval, DefaultProbeInterval)
	c.MaxPollInterval = max(c.MaxPollInterval, c.MinPollInterval)
	orDefault(&c.PublishTimeout, DefaultPublishTimeout)
	orDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	orDefault(&c.LeaseTTL, DefaultLeaseTTL)
	orDefault(&c.MaxPayloadBytes, DefaultMaxPayloadBytes)
	orDefault(&c.NoRouteGrace, DefaultNoRouteGrace)
	orDefault(&c.MetricsInterval, DefaultMetricsInterval)
	orDefault(&c.ClaimCheckGrace, DefaultClaimCheckGrace)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Alerts = c.Alerts.withDefaults()
	c.Retention = c.Retention.withDefaults()
}

// orDefault sets *p to d when it is the zero value.
func orDefault[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}

// BatchReport describes one settled round; outbox.BatchReport has the
// same fields.
type BatchReport struct {
	Read                                   int
	Sent, Retried, Dead, Deferred, Skipped int
	Settled                                int64
	BatchSize                              int
}

// Store is what the relay needs of the database: the statements of
// internal/store it runs, so that rounds can run without one in tests.
type Store interface {
	// Start and stop.
	Partitions(ctx context.Context) (int, error)
	CheckSchema(ctx context.Context) error
	ServerAdvice(ctx context.Context) ([]string, error)
	DropRelay(ctx context.Context, id string) error

	// Rounds.
	Read(ctx context.Context, parts []int, limit int) ([]store.Row, error)
	ReadMark(ctx context.Context, owner string, parts []int, limit int) ([]store.Row, error)
	MarkInflight(ctx context.Context, owner string, parts []int, maxIDs []int64) error
	Settle(ctx context.Context, owner string, outs []store.Outcome) (int64, error)

	// Leases.
	Heartbeat(ctx context.Context, id, routes string, ttl time.Duration) ([]store.Relay, error)
	PruneRelays(ctx context.Context, age time.Duration) error
	Renew(ctx context.Context, owner string, ttl time.Duration) (int64, error)
	Acquire(ctx context.Context, owner string, parts []int, ttl time.Duration) ([]store.Lease, error)
	Held(ctx context.Context, owner string) ([]store.Lease, error)
	Release(ctx context.Context, owner string, parts []int) error

	// Route health: a route's state change, for `outbox status`.
	RecordRoute(ctx context.Context, relay, route string, down bool, reason string) error

	// Observation and retention.
	Gauges(ctx context.Context) (store.GaugeSample, error)
	Retain(ctx context.Context, after int64, limit int, p store.RetentionPolicy) (store.RetentionBatch, error)
	RetainIn(ctx context.Context, table string, after int64, limit int, p store.RetentionPolicy) (store.RetentionBatch, error)
	Partitioned(ctx context.Context) (bool, error)
	DayPartitions(ctx context.Context) ([]store.DayPartition, error)
	AddPartitions(ctx context.Context, from, to int) (int, error)
	PartitionState(ctx context.Context, name string, p store.RetentionPolicy) (store.PartitionState, error)
	DropPartition(ctx context.Context, p store.DayPartition, archive bool) (bool, error)
}

var _ Store = (*store.Store)(nil)
