package cli

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/fleet"
)

// fleetAdmin is the admin surface of a relay serving a list of databases:
// /db/NAME/ is the admin API and web page of database NAME (with a
// selector of the others), opened on first use and closed when it leaves
// the list; / leads to the first database's page; /healthz, /readyz and
// /metrics are the relay's own.
type fleetAdmin struct {
	e      *env
	top    *admin.Server // the relay's health and metrics
	cfg    admin.Config  // tokens, hosts and logger of every database's server
	limits dburl.Limits

	mu   sync.Mutex
	list []fleet.Database
	open map[string]*adminDB // by name
}

// adminDB is one database's admin server.
type adminDB struct {
	url string
	db  *dburl.DB
	srv *admin.Server
	// sampler is the history sampler; nil when none runs.
	sampler *sampler
}

// sampler is a running history sampler.
type sampler struct{ stop func() }

// shut stops the sampler and closes the database.
func (o *adminDB) shut() {
	if o.sampler != nil {
		o.sampler.stop()
	}
	o.db.Close()
}

// setList replaces the databases, closing those that left or changed.
func (a *fleetAdmin) setList(list []fleet.Database) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = slices.Clone(list)
	for name, o := range a.open {
		if i := slices.IndexFunc(list, func(d fleet.Database) bool { return d.Name == name }); i < 0 || list[i].URL != o.url {
			o.shut()
			delete(a.open, name)
		}
	}
}

// names lists the databases' names.
func (a *fleetAdmin) names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, len(a.list))
	for i, d := range a.list {
		out[i] = d.Name
	}
	return out
}

// server is database name's admin server, opened on first use; nil when
// the list has no such database.
func (a *fleetAdmin) server(ctx context.Context, name string) (*admin.Server, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, err := a.openLocked(ctx, name)
	if o == nil {
		return nil, err
	}
	return o.srv, nil
}

// openLocked is database name's admin server, opened if need be; nil
// when the list has no such database. a.mu is held.
func (a *fleetAdmin) openLocked(ctx context.Context, name string) (*adminDB, error) {
	if o := a.open[name]; o != nil {
		return o, nil
	}
	i := slices.IndexFunc(a.list, func(d fleet.Database) bool { return d.Name == name })
	if i < 0 {
		return nil, nil
	}
	db, err := dburl.OpenLimited(ctx, a.list[i].URL, a.limits)
	if err != nil {
		return nil, err
	}
	cfg := a.cfg
	cfg.Database, cfg.Databases = name, a.names
	cfg.Logger = cfg.Logger.With("database", name)
	srv, err := newAdminServer(db, &cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	o := &adminDB{url: a.list[i].URL, db: db, srv: srv}
	a.open[name] = o
	return o, nil
}

func (a *fleetAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	switch {
	case p == "/healthz" || p == "/readyz" || p == "/metrics":
		a.top.ServeHTTP(w, r)
		return
	case p == "/":
		names := a.names()
		if len(names) == 0 {
			http.Error(w, "no databases listed", http.StatusNotFound)
			return
		}
		http.Redirect(w, r, "db/"+url.PathEscape(names[0])+"/", http.StatusFound)
		return
	case !strings.HasPrefix(p, "/db/"):
		http.NotFound(w, r)
		return
	}
	seg, rest, slash := strings.Cut(strings.TrimPrefix(p, "/db/"), "/")
	name, err := url.PathUnescape(seg)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if !slash {
		http.Redirect(w, r, url.PathEscape(name)+"/", http.StatusFound)
		return
	}
	srv, err := a.server(r.Context(), name)
	switch {
	case err != nil:
		http.Error(w, "database "+name+": "+a.e.redact(errorLine(err)), http.StatusBadGateway)
		return
	case srv == nil:
		http.NotFound(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.RawPath = ""
	if r2.URL.Path, err = url.PathUnescape("/" + rest); err != nil {
		http.NotFound(w, r)
		return
	}
	srv.ServeHTTP(w, r2)
}

// close closes every database opened.
func (a *fleetAdmin) close() { a.setList(nil) }

// sample runs the history sampler of database name, which this relay has
// started serving, until the returned function is called (when the relay
// stops serving it) or the database leaves the list: the charts of
// /db/NAME/ then show the database's recent past on the relay that
// serves it. The admin server, opened here if no request opened it yet,
// keeps its history until the database leaves the list.
func (a *fleetAdmin) sample(ctx context.Context, name string) (stop func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, err := a.openLocked(ctx, name)
	if o == nil {
		if err != nil {
			a.cfg.Logger.Warn("outbox admin: the database's history is not sampled", "database", name, "err", a.e.redact(errorLine(err)))
		}
		return func() {}
	}
	if o.sampler != nil {
		o.sampler.stop()
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = o.srv.Run(sctx)
	}()
	sm := &sampler{stop: sync.OnceFunc(func() {
		cancel()
		<-done
	})}
	o.sampler = sm
	return func() {
		sm.stop()
		a.mu.Lock()
		defer a.mu.Unlock()
		if o.sampler == sm {
			o.sampler = nil
		}
	}
}
