package outbox

import (
	"context"
	"errors"

	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/relay"
)

// Relay moves committed messages from the outbox table to their
// destinations. Build one with NewRelay and call Run.
//
// A relay owns a share of the table's partitions (leases in the
// database), reads their ready rows in id order, publishes them through
// the routes and records each outcome; many relays over one database
// split the partitions between them, and per-key order holds across them.
// See docs/design.md for the algorithm.
type Relay struct {
	engine *relay.Relay
}

// NewRelay returns a relay reading through driver's database. The driver's
// transaction type does not matter to the relay. cfg is checked here: a
// bad field is an error naming it.
func NewRelay[TTx any](driver Driver[TTx], cfg *RelayConfig) (*Relay, error) {
	if driver == nil {
		return nil, errors.New("outbox: NewRelay: nil driver")
	}
	if cfg == nil {
		return nil, errors.New("outbox: NewRelay: nil config")
	}
	ec := cfg.engine()
	if err := ec.Check(); err != nil {
		return nil, err
	}
	ec.SetDefaults()
	b, err := backendOf("NewRelay", driver)
	if err != nil {
		return nil, err
	}
	if cfg.Listener != nil {
		b.ListenOn(cfg.Listener)
	}
	if cfg.ChangeFeed != nil {
		b.Feed = cfg.ChangeFeed
	}
	e, err := adoptstore.NewRelay(b, ec)
	if err != nil {
		return nil, err
	}
	return &Relay{engine: e}, nil
}

// ID is the relay's instance id.
func (r *Relay) ID() string { return r.engine.ID() }

// Ready reports whether the relay's work on its database goes through:
// nil, or an error saying what keeps failing — its rounds (reading,
// settling) or its lease renewals, three times in a row or more — and the
// last failure. One success of the same kind makes it nil again. The
// error may name the database, its host and user: give it to operators,
// not to anonymous callers. Every failure also counts in the metric
// outbox_database_errors_total{class}.
func (r *Relay) Ready() error { return r.engine.Ready() }

// Wake says how the relay learns of new messages between its polls:
// "notify" (PostgreSQL LISTEN, for the signals of Go producers), "probe
// 10ms" (the change probe of RelayConfig.ProbeInterval, for every
// producer), both joined by " + ", or "poll" when it only polls, at most
// MaxPollInterval apart (a probe that fails, a LISTEN that cannot work
// through a pooler).
func (r *Relay) Wake() string { return r.engine.Wake() }

// Run relays until ctx is cancelled, then finishes or releases its
// in-flight batch (within ShutdownTimeout), gives up its partitions so
// other relays take them at once, and returns nil. It returns an error
// only when it cannot start (no schema) or is already running.
func (r *Relay) Run(ctx context.Context) error { return r.engine.Run(ctx) }
