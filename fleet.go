package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txoutbox/outbox/internal/fleet"
	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
)

// Fleet defaults.
const (
	// DefaultFleetName is the fleet of a FleetConfig without a Name.
	DefaultFleetName = "outbox"
	// DefaultFleetHeartbeat is how often a member refreshes its row in
	// the coordination database and recomputes what it serves.
	DefaultFleetHeartbeat = time.Second
	// DefaultFleetMemberTTL is how long a member that stopped beating
	// still counts: its databases move after this.
	DefaultFleetMemberTTL = 5 * time.Second
	// DefaultFleetWorkers is how many rounds (read, publish, settle) a
	// member runs at once across all its databases.
	DefaultFleetWorkers = 32
	// DefaultFleetDatabaseWorkers is RelayConfig.Workers of each
	// database of a fleet unless set: few, since a member may serve
	// hundreds of mostly idle databases, and each worker reads.
	DefaultFleetDatabaseWorkers = 2
)

// FleetDriver is a driver of any transaction type, for the databases of a
// Fleet (which may mix drivers). Make one with FleetDriverOf.
type FleetDriver struct {
	backend *store.Backend
}

// FleetDriverOf wraps d for a Fleet.
func FleetDriverOf[TTx any](d Driver[TTx]) (FleetDriver, error) {
	b, err := backendOf("FleetDriverOf", d)
	return FleetDriver{backend: b}, err
}

// FleetDatabase is one database of a Fleet.
type FleetDatabase struct {
	// Name labels the database in metrics (the database label), logs and
	// alerts, and decides which member serves it: every member must give
	// the same database the same name. It must not hold credentials.
	Name string
	// Version, when it changes between two SetDatabases calls, makes the
	// member serving the database stop and open it again (a new URL, new
	// credentials). Optional.
	Version string
	// Open connects to the database when this member starts serving it.
	// The member calls closeFn, when not nil, when it stops serving it
	// (the database moved to another member, left the list, or the fleet
	// stopped). An
	// error is logged and Open is tried again after a pause growing from
	// 1 s to 30 s; the other databases are not held up.
	Open func(ctx context.Context) (d FleetDriver, closeFn func(), err error)
}

// FleetConfig configures a Fleet.
type FleetConfig struct {
	// Name names the fleet: the processes that share a list of databases
	// give the same Name and the same coordination database. Defaults to
	// DefaultFleetName.
	Name string
	// Member is this process's id among the fleet's members, and the ID
	// of each of its relays. Defaults to Relay.ID, else host-pid-random.
	Member string
	// Heartbeat is how often the member refreshes its row and recomputes
	// its share. Defaults to DefaultFleetHeartbeat.
	Heartbeat time.Duration
	// MemberTTL: a member not seen for this long is gone and its
	// databases move. Defaults to DefaultFleetMemberTTL; at least 1 s and
	// more than Heartbeat.
	MemberTTL time.Duration
	// Workers is the most rounds (read, publish, settle) the member runs
	// at once across all its databases; a round waiting for one gets it
	// in turn with the other databases', so a database with a backlog
	// takes no more than its share while others have work. Defaults to
	// DefaultFleetWorkers.
	Workers int
	// Relay is the configuration of the relay run over each database the
	// member serves. Its Logger gains a database attribute, its Metrics
	// a database label (a database's series are removed when the member
	// stops serving it), and its alerts name the database. Workers
	// defaults to DefaultFleetDatabaseWorkers per database. Listener and
	// ChangeFeed must be nil (each database's driver has its own). Routes
	// and publishers are shared by every database.
	Relay RelayConfig
}

// Fleet serves a changing list of databases together with the other
// processes of the same fleet: each database is served by one member at a
// time, chosen by rendezvous hashing over the members alive in the
// coordination database (table outbox_fleet_members, migration 8), and
// the member opens connections only to the databases it serves. While the
// membership changes, the databases' own partition leases keep two
// members from publishing for one database at once. See docs/fleet.md.
type Fleet struct {
	sup    *fleet.Supervisor
	relays *fleet.Relays
	dbs    fleet.Databases
	member string
}

// NewFleet returns the member of a fleet whose coordination database is
// coord's; SetDatabases gives it the list, Run serves its share.
func NewFleet[TTx any](coord Driver[TTx], cfg *FleetConfig) (*Fleet, error) {
	if cfg == nil {
		return nil, errors.New("outbox: NewFleet: nil config")
	}
	b, err := backendOf("NewFleet", coord)
	if err != nil {
		return nil, err
	}
	c := *cfg
	if c.Name == "" {
		c.Name = DefaultFleetName
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultFleetHeartbeat
	}
	if c.MemberTTL == 0 {
		c.MemberTTL = DefaultFleetMemberTTL
	}
	switch {
	case c.Heartbeat < 0:
		return nil, errors.New("outbox: FleetConfig.Heartbeat must not be negative")
	case c.MemberTTL <= c.Heartbeat:
		return nil, errors.New("outbox: FleetConfig.MemberTTL must be longer than Heartbeat")
	case c.Workers < 0:
		return nil, errors.New("outbox: FleetConfig.Workers must not be negative")
	case c.Relay.Listener != nil:
		return nil, errors.New("outbox: FleetConfig.Relay.Listener must be nil: each database listens over its own driver")
	case c.Relay.ChangeFeed != nil:
		return nil, errors.New("outbox: FleetConfig.Relay.ChangeFeed must be nil: each database's driver follows its own commits (driver.ChangeFeed)")
	}
	if c.Workers == 0 {
		c.Workers = DefaultFleetWorkers
	}
	rc := c.Relay.engine()
	if rc.Workers == 0 {
		rc.Workers = DefaultFleetDatabaseWorkers
	}
	if err := rc.Check(); err != nil {
		return nil, err
	}
	rc.SetDefaults()
	if c.Member == "" {
		c.Member = rc.ID
	}
	if c.Member == "" {
		c.Member = relay.DefaultID()
	}
	rc.ID = c.Member
	m, err := fleet.NewMembership(b.Store.DB(), b.Store.Dialect(), c.Name, c.Member, c.MemberTTL)
	if err != nil {
		return nil, fmt.Errorf("outbox: NewFleet: %w", err)
	}
	f := &Fleet{member: c.Member}
	rs := &fleet.Relays{Relay: rc, Share: make(chan struct{}, c.Workers), Open: f.dbs.Open}
	f.relays = rs
	f.sup = fleet.NewSupervisor(m, fleet.Config{Heartbeat: c.Heartbeat, Serve: rs.Serve, Logger: rc.Logger})
	return f, nil
}

// Member is this process's id in the fleet.
func (f *Fleet) Member() string { return f.member }

// SetDatabases replaces the list of databases, while Run runs or before:
// databases new to the list start being served by their member, removed
// ones are released (their in-flight batch finished or put back, their
// partitions given up, their connections closed). Names must be unique
// and every database needs Open.
func (f *Fleet) SetDatabases(dbs []FleetDatabase) error {
	listed := make([]fleet.Listed, len(dbs))
	for i, db := range dbs {
		listed[i] = fleet.Listed{Name: db.Name, Version: db.Version}
		if open := db.Open; open != nil {
			listed[i].Open = func(ctx context.Context) (*store.Backend, func(), error) {
				d, closeFn, err := open(ctx)
				return d.backend, closeFn, err
			}
		}
	}
	list, err := f.dbs.Set(listed)
	if err != nil {
		return err
	}
	f.sup.SetList(list)
	return nil
}

// Serving lists the names of the databases this member serves now, in
// sorted order.
func (f *Fleet) Serving() []string { return f.sup.Serving() }

// Ready reports whether the relay of every database this member serves
// is ready (Relay.Ready): nil, or the first one's error, naming the
// database. The error may name a database's host and user: give it to
// operators, not to anonymous callers.
func (f *Fleet) Ready() error { return f.relays.Ready() }

// Run serves this member's share until ctx is cancelled, then stops every
// database's relay (each finishes or releases its in-flight batch), leaves
// the fleet so the others take over at once, and returns nil.
func (f *Fleet) Run(ctx context.Context) error { return f.sup.Run(ctx) }
