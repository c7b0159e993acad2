package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/internal/store"
)

// Config is a relay's complete configuration: outbox.RelayConfig with
// every default filled in and every value checked (the facade does both).
type Config struct {
	Routes          []Route
	ID              string // "" is host-pid-random
	Logger          *slog.Logger
	BatchSize       int
	Workers         int
	MinBatchSize    int
	MinPollInterval time.Duration
	MaxPollInterval time.Duration
	PublishTimeout  time.Duration
	ShutdownTimeout time.Duration
	LeaseTTL        time.Duration
	Retry           RetryPolicy
	MaxPayloadBytes int
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

	// Store replaces the backend's store (tests run rounds on a fake).
	// Defaults to the backend's.
	Store Store
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
	Heartbeat(ctx context.Context, id string, ttl time.Duration) ([]string, error)
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
