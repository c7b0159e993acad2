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
}

// setList replaces the databases, closing those that left or changed.
func (a *fleetAdmin) setList(list []fleet.Database) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = slices.Clone(list)
	for name, o := range a.open {
		if i := slices.IndexFunc(list, func(d fleet.Database) bool { return d.Name == name }); i < 0 || list[i].URL != o.url {
			o.db.Close()
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
	if o := a.open[name]; o != nil {
		return o.srv, nil
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
	srv, err := newAdminServer(db, &cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	a.open[name] = &adminDB{url: a.list[i].URL, db: db, srv: srv}
	return srv, nil
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
