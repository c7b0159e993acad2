package fleet

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Config tunes a Supervisor.
type Config struct {
	// Heartbeat is how often the member refreshes its row and recomputes
	// what it serves. Defaults to 1 s.
	Heartbeat time.Duration
	// Serve runs one database until ctx is done (the database moved to
	// another member, left the list, or the supervisor stops). An error
	// before that is logged and Serve runs again after a pause growing
	// from 1 s to 30 s.
	Serve func(ctx context.Context, db Database) error
	// Logger receives one line per database started, stopped or failed.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Supervisor serves this member's share of a database list: it beats,
// reads the live members, and starts and stops a Serve per database as
// the list and the membership change.
type Supervisor struct {
	m   *Membership
	cfg Config

	mu      sync.Mutex
	list    []Database
	running map[string]*runner
	changed chan struct{}
}

type runner struct {
	db     Database
	cancel context.CancelFunc
	done   chan struct{}
}

// NewSupervisor returns a supervisor for member m; SetList gives it the
// databases.
func NewSupervisor(m *Membership, cfg Config) *Supervisor {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Supervisor{m: m, cfg: cfg, running: map[string]*runner{}, changed: make(chan struct{}, 1)}
}

// SetList replaces the database list; the change takes effect at once.
func (s *Supervisor) SetList(dbs []Database) {
	s.mu.Lock()
	s.list = slices.Clone(dbs)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Serving lists the names of the databases this member serves now.
func (s *Supervisor) Serving() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.running))
	for n := range s.running {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Run beats and serves until ctx is done, then stops every database,
// waits for them and leaves the fleet. While the coordination database
// cannot be reached for longer than the membership TTL less a heartbeat,
// the member serves nothing: the others may already count it gone.
func (s *Supervisor) Run(ctx context.Context) error {
	defer func() {
		s.apply(nil)
		leaveCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.m.Leave(leaveCtx); err != nil {
			s.cfg.Logger.Warn("fleet: could not leave; the others take over after the TTL", "err", err)
		}
	}()
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	var lastBeat time.Time
	for {
		members, err := s.beat(ctx)
		switch {
		case err == nil:
			lastBeat = time.Now()
			s.mu.Lock()
			list := s.list
			s.mu.Unlock()
			s.apply(Assigned(s.m.Self(), members, list))
		case ctx.Err() != nil:
			return nil
		default:
			s.cfg.Logger.Warn("fleet: coordination database unreachable", "err", err)
			if time.Since(lastBeat) > s.m.ttl-s.cfg.Heartbeat {
				s.apply(nil)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-s.changed:
		}
	}
}

func (s *Supervisor) beat(ctx context.Context) ([]string, error) {
	if err := s.m.Beat(ctx); err != nil {
		return nil, err
	}
	return s.m.Live(ctx)
}

// apply makes the running set want: stops what is not in it (or whose URL
// changed) and waits for it, then starts what is missing.
func (s *Supervisor) apply(want []Database) {
	wanted := map[string]Database{}
	for _, db := range want {
		wanted[db.Name] = db
	}
	s.mu.Lock()
	var stopping []*runner
	for name, r := range s.running {
		if db, ok := wanted[name]; !ok || db.URL != r.db.URL {
			r.cancel()
			stopping = append(stopping, r)
			delete(s.running, name)
		}
	}
	s.mu.Unlock()
	for _, r := range stopping {
		<-r.done
		s.cfg.Logger.Info("fleet: stopped serving database", "database", r.db.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, db := range wanted {
		if _, ok := s.running[name]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &runner{db: db, cancel: cancel, done: make(chan struct{})}
		s.running[name] = r
		go s.serve(ctx, r)
		s.cfg.Logger.Info("fleet: serving database", "database", name)
	}
}

// serve runs Serve for r until its context ends, again after each failure.
func (s *Supervisor) serve(ctx context.Context, r *runner) {
	defer close(r.done)
	pause := time.Second
	for {
		err := s.cfg.Serve(ctx, r.db)
		if ctx.Err() != nil {
			return
		}
		s.cfg.Logger.Warn("fleet: database failed; serving it again shortly", "database", r.db.Name, "err", err, "in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}
