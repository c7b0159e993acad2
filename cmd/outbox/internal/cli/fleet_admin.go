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
	// served: db is the relay's own, while it serves the database; the
	// relay closes it. Otherwise db was opened for the page and is
	// closed with it.
	served bool
	// stopSampling stops the history sampler of a served database; nil
	// when none runs.
	stopSampling func()
	// inflight counts the requests using the page; Add is called under
	// fleetAdmin.mu while the page is in fleetAdmin.open, so once it is
	// taken out, Wait sees every request that may still use db.
	inflight sync.WaitGroup
}

// shut stops the sampler and, once the requests in flight are done,
// closes the database unless it is the relay's. The page is out of
// fleetAdmin.open already.
func (o *adminDB) shut() {
	if o.stopSampling != nil {
		o.stopSampling()
	}
	if !o.served {
		go func() {
			o.inflight.Wait()
			o.db.Close()
		}()
	}
}

// setList replaces the databases, closing those that left or changed.
func (a *fleetAdmin) setList(list []fleet.Database) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = slices.Clone(list)
	for name, o := range a.open {
		if i := slices.IndexFunc(list, func(d fleet.Database) bool { return d.Name == name }); i < 0 || list[i].URL != o.url {
			delete(a.open, name)
			o.shut()
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

// server is database name's admin server, opened on first use, and the
// function to call when the request using it is done; nil when the list
// has no such database.
func (a *fleetAdmin) server(ctx context.Context, name string) (*admin.Server, func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, err := a.openLocked(ctx, name)
	if o == nil {
		return nil, nil, err
	}
	o.inflight.Add(1)
	return o.srv, o.inflight.Done, nil
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
	srv, err := a.newServer(name, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	o := &adminDB{url: a.list[i].URL, db: db, srv: srv}
	a.open[name] = o
	return o, nil
}

// newServer is the admin server of database name over db, its selector
// listing the list's databases and its logs naming it.
func (a *fleetAdmin) newServer(name string, db *dburl.DB) (*admin.Server, error) {
	cfg := a.cfg
	cfg.Database, cfg.Databases = name, a.names
	cfg.Logger = cfg.Logger.With("database", name)
	return newAdminServer(db, nil, &cfg)
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
	srv, done, err := a.server(r.Context(), name)
	if done != nil {
		defer done()
	}
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

// serve shows database name, which this relay has started serving over
// db, through db itself, and samples its history until the returned
// function is called (when the relay stops serving it, before db
// closes): the charts of /db/NAME/ then show the database's recent past
// on the relay serving it, and the page costs no connection of its own.
// A page opened on the database before is replaced. Once the relay stops
// serving the database, the next request opens the page again with its
// own connections (and no history).
func (a *fleetAdmin) serve(name, rawURL string, db *dburl.DB) (stop func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	srv, err := a.newServer(name, db)
	if err != nil {
		a.cfg.Logger.Warn("outbox admin: the database's history is not sampled", "database", name, "err", a.e.redact(errorLine(err)))
		return func() {}
	}
	if old := a.open[name]; old != nil {
		delete(a.open, name)
		old.shut() // its requests in flight finish on its own connections
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(ctx)
	}()
	o := &adminDB{url: rawURL, db: db, srv: srv, served: true}
	o.stopSampling = sync.OnceFunc(func() {
		cancel()
		<-done
	})
	a.open[name] = o
	return func() {
		a.mu.Lock()
		if a.open[name] == o {
			delete(a.open, name)
		}
		a.mu.Unlock()
		o.stopSampling()
		// The relay closes db next: the requests using it finish first.
		o.inflight.Wait()
	}
}
