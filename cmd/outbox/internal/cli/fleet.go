package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/outboxbinlog"
	"github.com/txoutbox/outbox/internal/adopt"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/fleet"
	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// Fleet defaults of the relay command.
const (
	defaultDBMaxConns  = 4
	defaultDBIdleClose = 30 * time.Second
	// dbFileInterval is how often a --db-file is read again.
	dbFileInterval = time.Second
)

// fleetFlags are the relay's flags for serving several databases.
type fleetFlags struct {
	file      string
	name      string
	coordURL  string
	maxConns  int
	idleClose time.Duration
	workers   int
	// list is the config file's relay.databases, when they give the
	// databases (fromConfig); nil otherwise.
	list []fleet.Database
	// fileFrom names where file came from, for messages: "--db-file" or
	// the config key.
	fileFrom string
}

func (f *fleetFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "db-file", "", "serve the databases listed in `FILE` (a line: URL or NAME URL; # comments), read again when it changes")
	fs.StringVar(&f.name, "fleet", "", "fleet `NAME`: relays with the same name and --fleet-db share the databases (default $OUTBOX_FLEET, else "+outbox.DefaultFleetName+")")
	fs.StringVar(&f.coordURL, "fleet-db", "", "coordination database `URL` holding the fleet's members (default $OUTBOX_FLEET_DATABASE_URL, else the first database listed)")
	fs.IntVar(&f.maxConns, "db-max-conns", 0, fmt.Sprintf("with several databases: most connections per database (default %d)", defaultDBMaxConns))
	fs.IntVar(&f.workers, "fleet-workers", 0, fmt.Sprintf("with several databases: most rounds (read, publish, settle) at once across them, shared in turn (default %d; %d per database)", outbox.DefaultFleetWorkers, outbox.DefaultFleetDatabaseWorkers))
	fs.DurationVar(&f.idleClose, "db-idle-close", 0, fmt.Sprintf("with several databases: close a connection unused for `DURATION` (default %s)", defaultDBIdleClose))
}

// active reports whether the relay serves a list of databases rather
// than one: several --db or a --db-file.
func (f *fleetFlags) active(db *dbFlags) bool {
	return f.file != "" || len(db.list) > 1 || f.list != nil
}

// fromConfig resolves the fleet's settings: each from its flag, then its
// OUTBOX_ variable, then the config file's relay key. The databases come
// from --db or --db-file, else OUTBOX_DATABASE_URL (one database), else
// relay.db_file or relay.databases (a fleet, even of one database).
func (f *fleetFlags) fromConfig(r *resolver) error {
	c := r.cfg.Relay
	f.fileFrom = "--db-file"
	if !r.set["db"] && !r.set["db-file"] && r.env("OUTBOX_DATABASE_URL") == "" {
		switch {
		case c.DBFile != "" && c.Databases != nil:
			return usagef("%s: give either relay.databases or relay.db_file, not both", r.cfg.field("relay"))
		case c.DBFile != "":
			f.file, f.fileFrom = strings.TrimSpace(c.DBFile), r.cfg.field("relay.db_file")
		case c.Databases != nil:
			list, err := configDatabases(r.cfg)
			if err != nil {
				return err
			}
			f.list = list
		}
	}
	f.name = r.text("fleet", f.name, "OUTBOX_FLEET", strings.TrimSpace(c.Fleet))
	f.coordURL = r.text("fleet-db", f.coordURL, "OUTBOX_FLEET_DATABASE_URL", strings.TrimSpace(c.FleetDB))
	var err error
	if f.maxConns, err = r.count("db-max-conns", f.maxConns, "", "relay.db_max_conns", c.DBMaxConns); err != nil {
		return err
	}
	if f.workers, err = r.count("fleet-workers", f.workers, "", "relay.fleet_workers", c.FleetWorkers); err != nil {
		return err
	}
	if f.idleClose, err = r.duration("db-idle-close", f.idleClose, "", "relay.db_idle_close", c.DBIdleClose); err != nil {
		return err
	}
	return nil
}

// configDatabases reads relay.databases: one database an entry, "URL" or
// "NAME URL" as a line of a --db-file; names must be unique.
func configDatabases(cfg *fileConfig) ([]fleet.Database, error) {
	if len(cfg.Relay.Databases) == 0 {
		return nil, usagef("%s: lists no database", cfg.field("relay.databases"))
	}
	list := make([]fleet.Database, 0, len(cfg.Relay.Databases))
	seen := map[string]bool{}
	for i, entry := range cfg.Relay.Databases {
		at := cfg.field(fmt.Sprintf("relay.databases[%d]", i))
		if strings.ContainsAny(entry, "\n#") {
			return nil, usagef("%s: want URL or NAME URL on one line, without comments", at)
		}
		one, err := fleet.ParseList(strings.NewReader(entry))
		if err != nil {
			return nil, usagef("%s: %s", at, strings.TrimPrefix(err.Error(), "line 1: "))
		}
		if len(one) != 1 {
			return nil, usagef("%s: want URL or NAME URL", at)
		}
		if seen[one[0].Name] {
			return nil, usagef("%s: database %q is listed twice", at, one[0].Name)
		}
		seen[one[0].Name] = true
		list = append(list, one[0])
	}
	return list, nil
}

// relayFleet runs the relay over a list of databases, sharing them with
// the other relays of its fleet, until a signal arrives. rc is the relay
// configuration every database's relay starts from.
func (e *env) relayFleet(r *resolver, f *relayFlags, rc *outbox.RelayConfig, profile *adopt.Profile, surfaces relaySurfaces, specs []routeSpec) error {
	ff := &f.fleet
	list, coordURL, err := e.fleetDatabases(f)
	if err != nil {
		return err
	}
	member := rc.ID
	if member == "" {
		member = relay.DefaultID()
		rc.ID = member
	}
	limits := ff.limits(member)
	coord, err := e.openCoordination(coordURL, limits)
	if err != nil {
		return err
	}
	defer coord.Close()

	var running atomic.Bool
	var delivered atomic.Int64
	if surfaces.metrics != "" || surfaces.admin.addr != "" {
		surfaces.registry = metricsRegistry()
		rc.Metrics = surfaces.registry
		rc.OnBatch = func(b outbox.BatchReport) { delivered.Add(int64(b.Sent)) }
	}
	surfaces.delivered, surfaces.running = &delivered, &running
	surfaces.keys = rc.Keys
	cfg := &outbox.FleetConfig{Name: ff.name, Member: member, Workers: ff.workers, Relay: *rc}
	if cfg.Name == "" {
		cfg.Name = outbox.DefaultFleetName
	}
	fl, err := coord.NewFleet(cfg)
	if err != nil {
		return asUsage(fmt.Errorf("relay: %s", errorLine(err)))
	}
	// The schemas of one PostgreSQL database share its NOTIFY channels:
	// the databases served listen over one connection per server and
	// database, and a signal wakes only the schema it names.
	served := limits
	served.Listeners = &dburl.Listeners{}
	opener := &fleetOpener{e: e, limits: served, profile: profile, binlog: r.text("binlog", f.binlog, "OUTBOX_BINLOG", r.cfg.Relay.Binlog), logger: rc.Logger}

	if err := fl.SetDatabases(opener.databases(list)); err != nil {
		return asUsage(fmt.Errorf("relay: %s", errorLine(err)))
	}
	surfaces.ready = fl.Ready
	adminAt := surfaces.admin
	surfaces.admin.addr = ""
	lns, err := e.listenSurfaces(coord, &surfaces, rc.Logger)
	if err != nil {
		return err
	}
	var fa *fleetAdmin
	if adminAt.addr != "" {
		if fa, err = e.fleetAdmin(coord, adminAt, &surfaces, rc.Logger, limits, list); err != nil {
			return err
		}
		defer fa.close()
		opener.admin = fa
		ln, err := listenAdmin(e.ctx, adminAt, fa.top, rc.Logger)
		if err != nil {
			return err
		}
		ln.http = newHTTPServer(fa, rc.Logger)
		lns = append(lns, ln)
	}
	logger := rc.Logger
	for _, s := range specs {
		logger.Info("outbox relay: route", "pattern", s.pattern, "to", outboxurl.Redact(s.url), "from", s.source)
	}
	logger.Info("outbox relay: fleet", "fleet", cfg.Name, "member", member, "databases", len(list), "coordination", fleet.DefaultName(coordURL))
	run := fl.Run
	if ff.file != "" {
		run = func(ctx context.Context) error {
			w := &listWatcher{e: e, path: ff.file, fleet: fl, opener: opener, logger: logger, last: list, admin: fa}
			if ff.coordURL == "" {
				w.coord = coordURL
			}
			go w.watch(ctx)
			return fl.Run(ctx)
		}
	}
	return e.runRelay(run, lns, &running)
}

// fleetDatabases checks the flags that give a fleet's databases and
// returns the databases listed (their passwords kept out of every
// message) and the coordination database: --fleet-db, else the first
// database listed.
func (e *env) fleetDatabases(f *relayFlags) (list []fleet.Database, coordURL string, err error) {
	ff := &f.fleet
	if ff.file != "" && len(f.db.list) > 0 {
		return nil, "", usagef("relay: give either --db (repeated) or --db-file, not both")
	}
	if f.listenDB != "" {
		return nil, "", usagef("relay: --listen-db serves one database; with several, each listens over its own connection")
	}
	list, err = e.readDBList(f)
	if err != nil {
		return nil, "", err
	}
	if len(list) == 0 && ff.file == "" {
		return nil, "", usagef("relay: no databases")
	}
	for _, db := range list {
		e.addSecret(passwordOf(db.URL))
	}
	coordURL = ff.coordURL
	if coordURL == "" {
		if len(list) == 0 {
			return nil, "", usagef("relay: %s lists no database; give --fleet-db URL (or relay.fleet_db) for the coordination database", ff.file)
		}
		coordURL = list[0].URL
	}
	e.addSecret(passwordOf(coordURL))
	return list, coordURL, nil
}

// limits are the connection limits of each database the fleet's member
// serves: --db-max-conns and --db-idle-close, or their defaults.
func (f *fleetFlags) limits(member string) dburl.Limits {
	limits := dburl.Limits{MaxConns: f.maxConns, IdleTime: f.idleClose, AppName: appName(member)}
	if limits.MaxConns == 0 {
		limits.MaxConns = defaultDBMaxConns
	}
	if limits.IdleTime == 0 {
		limits.IdleTime = defaultDBIdleClose
	}
	return limits
}

// fleetAdmin builds the admin surface of a relay over list: the relay's
// health and metrics over the coordination database, and a page per
// database with the admin settings.
func (e *env) fleetAdmin(coord *dburl.DB, at adminSettings, s *relaySurfaces, logger *slog.Logger, limits dburl.Limits, list []fleet.Database) (*fleetAdmin, error) {
	ready := s.readiness
	top, err := newAdminServer(coord, nil, &admin.Config{
		Tokens: at.tokens, AllowedHosts: at.hosts, Gatherer: s.registry,
		Delivered: s.delivered.Load, Logger: logger, Ready: ready,
	})
	if err != nil {
		return nil, err
	}
	limits.MaxConns = 2
	fa := &fleetAdmin{e: e, top: top, limits: limits, open: map[string]*adminDB{},
		cfg: admin.Config{Tokens: at.tokens, AllowedHosts: at.hosts, Logger: logger, Keys: s.keys}}
	fa.setList(list)
	return fa, nil
}

// readDBList reads the databases from --db-file, else the --db flags.
func (e *env) readDBList(f *relayFlags) ([]fleet.Database, error) {
	if f.fleet.list != nil {
		return f.fleet.list, nil
	}
	if f.fleet.file == "" {
		for _, u := range f.db.list {
			if _, _, err := dburl.Parse(u); err != nil {
				return nil, usagef("relay: --db: %v", err)
			}
		}
		list, err := fleet.FromURLs(f.db.list)
		if err != nil {
			return nil, usagef("relay: --db: %v", err)
		}
		return list, nil
	}
	b, err := os.ReadFile(f.fleet.file)
	if err != nil {
		if f.fleet.fileFrom != "--db-file" {
			return nil, usagef("%s: %v", f.fleet.fileFrom, err)
		}
		return nil, usagef("relay: --db-file: %v", err)
	}
	list, err := fleet.ParseList(bytes.NewReader(b))
	if err != nil {
		return nil, usagef("relay: %s: %v", f.fleet.file, err)
	}
	return list, nil
}

// openCoordination opens the fleet's coordination database and checks
// that it holds outbox_fleet_members (migration 8).
func (e *env) openCoordination(raw string, limits dburl.Limits) (*dburl.DB, error) {
	limits.MaxConns = 2
	db, err := dburl.OpenLimited(e.ctx, raw, limits)
	if err != nil {
		if errors.Is(err, dburl.ErrBadURL) {
			return nil, asUsage(fmt.Errorf("relay: --fleet-db: %w", err))
		}
		return nil, fmt.Errorf("relay: coordination database: %w", err)
	}
	if v, err := store.SchemaVersion(e.ctx, db.Backend().Store.DB()); err != nil || v < 8 {
		db.Close()
		return nil, fmt.Errorf("relay: the coordination database %s has no outbox_fleet_members table (schema version %d); run 'outbox migrate' on it", fleet.DefaultName(raw), v)
	}
	return db, nil
}

// fleetOpener opens the databases of a fleet within the limits.
type fleetOpener struct {
	e      *env
	limits dburl.Limits
	// profile, when the relay adopts a table (--adopt), maps each
	// database's table.
	profile *adopt.Profile
	// binlog is --binlog: "", auto or off (a fleet follows each MySQL
	// database's binary log over its own URL).
	binlog string
	logger *slog.Logger
	// admin, when the relay serves the admin surface, shows each
	// database over the relay's connections and samples its history
	// while the relay serves it. Set before Run.
	admin *fleetAdmin
}

func (o *fleetOpener) databases(list []fleet.Database) []outbox.FleetDatabase {
	out := make([]outbox.FleetDatabase, len(list))
	for i, db := range list {
		out[i] = outbox.FleetDatabase{Name: db.Name, Version: db.URL, Open: o.open(db.Name, db.URL)}
	}
	return out
}

// open opens database name at raw when the relay starts serving it; with
// the admin surface on, its page and history go over the relay's
// connections until the relay stops serving it.
func (o *fleetOpener) open(name, raw string) func(ctx context.Context) (outbox.FleetDriver, func(), error) {
	return func(ctx context.Context) (outbox.FleetDriver, func(), error) {
		db, err := dburl.OpenLimited(ctx, raw, o.limits)
		if err != nil {
			return outbox.FleetDriver{}, nil, errors.New(o.e.redact(err.Error()))
		}
		if v, err := store.SchemaVersion(ctx, db.Backend().Store.DB()); err != nil || v == 0 {
			db.Close()
			if err != nil {
				return outbox.FleetDriver{}, nil, errors.New(o.e.redact(err.Error()))
			}
			return outbox.FleetDriver{}, nil, errors.New("the outbox tables are not installed in this database; run 'outbox migrate' on it")
		}
		var feed driver.ChangeFeed
		if db.Dialect == store.MySQL && o.binlog != "off" {
			f, err := outboxbinlog.OpenURL(raw)
			if err != nil {
				o.logger.Info("outbox relay: cannot follow the binlog; probing every probe_interval", "database", name, "err", o.e.redact(err.Error()))
			} else {
				feed = f
			}
		}
		d, err := fleetDriver(db, o.profile, feed)
		if err != nil {
			db.Close()
			return outbox.FleetDriver{}, nil, err
		}
		if o.admin == nil {
			return d, db.Close, nil
		}
		stop := o.admin.serve(name, raw, db)
		return d, func() {
			stop()
			db.Close()
		}, nil
	}
}

// listWatcher reads a --db-file again every dbFileInterval and hands the
// fleet the new list when the file changed; a list that does not parse is
// logged and the previous one kept.
type listWatcher struct {
	e      *env
	path   string
	fleet  *outbox.Fleet
	opener *fleetOpener
	logger *slog.Logger
	last   []fleet.Database
	admin  *fleetAdmin // nil without --admin
	// coord is the coordination database when it is the list's first
	// line at start (no --fleet-db): it stays for the process's life.
	coord string
}

func (w *listWatcher) watch(ctx context.Context) {
	t := time.NewTicker(dbFileInterval)
	defer t.Stop()
	// lastBytes starts empty: the file may have changed between the read
	// of the list the relay started with and this loop's start, so its
	// first read is compared with that list.
	var lastBytes []byte
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b, err := os.ReadFile(w.path)
		if err == nil && bytes.Equal(b, lastBytes) {
			continue
		}
		var list []fleet.Database
		if err == nil {
			list, err = fleet.ParseList(bytes.NewReader(b))
		}
		if err != nil {
			if msg := w.e.redact(err.Error()); msg != lastErr {
				lastErr = msg
				w.logger.Warn("outbox relay: database list unreadable; keeping the previous list", "file", w.path, "err", msg)
			}
			continue
		}
		lastBytes, lastErr = b, ""
		if slices.Equal(list, w.last) {
			continue
		}
		for _, db := range list {
			w.e.addSecret(passwordOf(db.URL))
		}
		if err := w.fleet.SetDatabases(w.opener.databases(list)); err != nil {
			w.logger.Warn("outbox relay: database list refused; keeping the previous list", "file", w.path, "err", err)
			continue
		}
		if w.admin != nil {
			w.admin.setList(list)
		}
		if w.coord != "" && (len(list) == 0 || list[0].URL != w.coord) && (len(w.last) == 0 || len(list) == 0 || list[0].URL != w.last[0].URL) {
			// Members find each other in one coordination database: a
			// relay started from now on would meet its own members in
			// the new first line, not this relay, and both would serve
			// the same databases (fenced by each database's leases, but
			// each connecting to all of them).
			first := "none"
			if len(list) > 0 {
				first = list[0].Name
			}
			w.logger.Warn("outbox relay: the database list's first line changed, but this relay keeps coordinating in the database it started with; relays started from now on coordinate in the new first line, apart from this one: give every relay the same --fleet-db",
				"file", w.path, "coordination", fleet.DefaultName(w.coord), "first_line", first)
		}
		added, removed := listDiff(w.last, list)
		w.last = list
		w.logger.Info("outbox relay: database list changed", "file", w.path, "databases", len(list), "added", strings.Join(added, ","), "removed", strings.Join(removed, ","))
	}
}

// listDiff names the databases of b not in a (added) and of a not in b
// (removed), a URL change counting as both.
func listDiff(a, b []fleet.Database) (added, removed []string) {
	has := func(l []fleet.Database, db fleet.Database) bool { return slices.Contains(l, db) }
	for _, db := range b {
		if !has(a, db) {
			added = append(added, db.Name)
		}
	}
	for _, db := range a {
		if !has(b, db) {
			removed = append(removed, db.Name)
		}
	}
	return added, removed
}

// appName is the PostgreSQL application_name of a fleet member's
// connections (at most 63 bytes are kept by the server).
func appName(member string) string {
	n := "outbox relay " + member
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}
