// Package admin serves the outbox's admin surface over HTTP: a JSON API to
// inspect, requeue, discard and mark messages consumed, Prometheus
// metrics, health and readiness checks, and the operator web page.
//
// A Server is an http.Handler; mount it on a server of your own (under a
// prefix with http.StripPrefix if you like) or let `outbox relay --admin
// ADDR` serve it:
//
//	srv, err := admin.New(driver, &admin.Config{
//		Tokens:   []admin.Token{{Name: "ops", Secret: os.Getenv("OUTBOX_ADMIN_TOKEN")}},
//		Gatherer: prometheus.DefaultGatherer,
//	})
//	go srv.Run(ctx) // samples the charts' history
//	http.ListenAndServe("127.0.0.1:8081", srv)
//
// # Authentication
//
// Every /api/v1 call needs "Authorization: Bearer <token>" when tokens are
// configured; tokens are compared in constant time and never accepted from
// the query string. With no token configured, reads are open and every
// change is refused with 403. /healthz, /readyz, /metrics and the page's
// static files need no token. A request whose Host header is not a
// loopback name, the address it came in on, or one of Config.AllowedHosts
// is answered 421 (DNS rebinding). Config.MetricsOnly serves /metrics,
// /healthz and /readyz alone, for scrapers.
//
// # Audit
//
// Every change (not dry runs) adds a row to outbox_audit naming the token
// that made it; GET /api/v1/audit lists them. The table comes with
// migration 2 (`outbox migrate`).
//
// docs/admin.md describes every endpoint, its parameters and answers.
package admin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/seal"
)

// Defaults and limits.
const (
	// DefaultHistoryInterval is how often Run samples the counts behind
	// /api/v1/stats/history.
	DefaultHistoryInterval = 10 * time.Second
	// HistoryWindow is how far back the history goes.
	HistoryWindow = time.Hour
	// MaxHistorySamples bounds the history's memory whatever the interval.
	MaxHistorySamples = 3600
	// MaxBodyBytes is the largest request body accepted (413 above).
	MaxBodyBytes = 64 << 10
)

// Token is one credential of the admin API.
type Token struct {
	// Name identifies the holder in the audit log and in logs. Required;
	// at most 255 characters, no control characters.
	Name string
	// Secret is what clients send as "Authorization: Bearer <Secret>".
	// Required; no spaces or control characters.
	Secret string
	// Permissions beyond reading and changing messages: PermReadPayloads
	// shows the plain text of sealed payloads (with Config.Keys).
	// Defaults to none: a sealed payload shows as "sealed, key K".
	Permissions []string
}

// Config configures a Server. The zero value is a read-only server
// without metrics.
type Config struct {
	// Tokens are the accepted bearer tokens. With none, reads need no
	// token and every change is refused with 403. Defaults to none.
	Tokens []Token
	// Gatherer is what /metrics serves, in the Prometheus text format.
	// Defaults to nil: /metrics answers 404.
	Gatherer prometheus.Gatherer
	// Ready, when set, is asked by /readyz after the database answered;
	// an error makes /readyz answer 503, with its text to a request that
	// holds one of Tokens and "not ready" alone to any other. Defaults to
	// nil: ready whenever the database answers.
	Ready func(ctx context.Context) error
	// Delivered, when set, returns a running total of messages delivered
	// (e.g. the sum of outbox.BatchReport.Sent from RelayConfig.OnBatch);
	// the history reports its rate as delivered_per_second. Defaults to
	// nil: delivered_per_second is null.
	Delivered func() int64
	// Logger receives one record per change and per failed request.
	// Defaults to slog.Default().
	Logger *slog.Logger
	// MetricsOnly makes the server answer /metrics, /healthz and /readyz
	// and nothing else (404): no API, no payloads, no web page, so it may
	// face scrapers on other hosts without a token. The Host check does
	// not apply. Defaults to false: the whole admin surface.
	MetricsOnly bool
	// AllowedHosts are further names (or addresses) the Host header of a
	// request may carry; "*" allows any. Requests are answered 421 unless
	// their Host is localhost, 127.0.0.1, [::1], the address the
	// connection came in on, or one of these, so that a web page in an
	// operator's browser cannot reach the API through DNS rebinding.
	// Defaults to none.
	AllowedHosts []string
	// Database and Databases, when Databases is set, make the server one
	// page of a fleet's: Database is the name of the database it shows,
	// Databases lists every database's name, and GET /api/v1/databases
	// answers both so the web page offers a selector. The pages are
	// expected side by side under a common prefix, each at NAME/ (the
	// selector links to ../NAME/). Defaults to nil: one database.
	Database  string
	Databases func() []string
	// HistoryInterval is how often Run samples the counts behind
	// /api/v1/stats/history; the last HistoryWindow of samples is kept
	// (at most MaxHistorySamples). Defaults to DefaultHistoryInterval.
	HistoryInterval time.Duration
	// Keys open sealed payloads for tokens with PermReadPayloads (see
	// package seal). Defaults to nil: sealed payloads are never shown.
	Keys seal.KeyProvider
}

// Server is the admin HTTP handler. It is safe for concurrent use.
type Server struct {
	backend *store.Backend
	// cur is what the server reads and changes (see view); base is
	// outbox_messages' store as the driver gives it, nil on an adopted
	// table; readPathAt is when the read path was last looked up (unix
	// nanoseconds, 0: to look up).
	cur         atomic.Pointer[stores]
	base        *store.Store
	readPathAt  atomic.Int64
	adopted     *adoptstore.Store
	tokens      []tokenHash
	promHandler http.Handler
	ready       func(ctx context.Context) error
	log         *slog.Logger
	mux         *http.ServeMux
	hist        *history
	running     atomic.Bool
	hosts       map[string]bool // lower case; "*" allows any
	metricsOnly bool

	database      string
	listDatabases func() []string

	// keys and readPayloads: sealed payloads are shown to the tokens
	// named in readPayloads when keys open them.
	keys         seal.KeyProvider
	readPayloads map[string]bool
}

// stores is what the server reads and changes: st is outbox_messages'
// store, or an adopted table's; full is outbox_messages' store, nil on an
// adopted table, for the changes only it can make.
type stores struct {
	st   source
	full *store.Store
}

// view is what the server reads and changes now.
func (s *Server) view() *stores { return s.cur.Load() }

// readPathCheck is how often the server looks up whether outbox_messages
// is read by snapshots.
const readPathCheck = 30 * time.Second

// followReadPath looks up, at most every readPathCheck, whether the
// database's outbox_messages is read by snapshots (outbox migrate
// --read-path snapshot), where a delivered message keeps status pending:
// the server then shows, searches and guards its changes by the status
// the relays see (store.SnapshotStatus). A failed lookup is tried again
// on the next request.
func (s *Server) followReadPath(ctx context.Context) {
	if s.base == nil {
		return
	}
	now := time.Now().UnixNano()
	last := s.readPathAt.Load()
	if last != 0 && time.Duration(now-last) < readPathCheck || !s.readPathAt.CompareAndSwap(last, now) {
		return
	}
	on, err := s.base.SnapshotReadEnabled(ctx)
	if err != nil {
		s.readPathAt.CompareAndSwap(now, 0)
		return
	}
	st := s.base
	if on {
		st = st.WithSnapshotRead()
	}
	s.cur.Store(&stores{st: st, full: st})
}

type tokenHash struct {
	name string
	sum  [sha256.Size]byte
}

// New returns a Server over the driver's database.
func New[TTx any](d outbox.Driver[TTx], cfg *Config) (*Server, error) {
	if d == nil {
		return nil, errors.New("admin: nil driver")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := store.NewBackend(d)
	s := &Server{
		backend: b,
		base:    b.Store,
		ready:   cfg.Ready,
		log:     cfg.Logger,
	}
	s.cur.Store(&stores{st: b.Store, full: b.Store})
	// A driver over an adopted table (store.TableSource): the server reads
	// and changes that table, and refuses what only outbox_messages takes.
	a, err := adoptstore.Of(b, 0)
	if err != nil {
		return nil, err
	}
	if a != nil {
		s.cur.Store(&stores{st: a})
		s.base, s.adopted = nil, a
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if cfg.Gatherer != nil {
		s.promHandler = promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	}
	s.keys, s.readPayloads = cfg.Keys, map[string]bool{}
	for _, t := range cfg.Tokens {
		s.tokens = append(s.tokens, tokenHash{name: t.Name, sum: sha256.Sum256([]byte(t.Secret))})
		for _, p := range t.Permissions {
			if p == PermReadPayloads {
				s.readPayloads[t.Name] = true
			}
		}
	}
	interval := cfg.HistoryInterval
	if interval == 0 {
		interval = DefaultHistoryInterval
	}
	s.hist = newHistory(interval, cfg.Delivered)
	s.metricsOnly = cfg.MetricsOnly
	s.database, s.listDatabases = cfg.Database, cfg.Databases
	s.hosts = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	for _, h := range cfg.AllowedHosts {
		s.hosts[strings.ToLower(strings.Trim(strings.TrimSpace(h), "[]"))] = true
	}
	s.routes()
	return s, nil
}

func (c *Config) validate() error {
	if c.HistoryInterval < 0 {
		return fmt.Errorf("admin: HistoryInterval %s is negative", c.HistoryInterval)
	}
	names, secrets := map[string]bool{}, map[string]bool{}
	for i, t := range c.Tokens {
		switch {
		case t.Name == "":
			return fmt.Errorf("admin: Tokens[%d]: empty name", i)
		case len(t.Name) > 255 || strings.IndexFunc(t.Name, unicode.IsControl) >= 0:
			return fmt.Errorf("admin: Tokens[%d]: name %q is longer than 255 characters or has control characters", i, t.Name)
		case t.Secret == "":
			return fmt.Errorf("admin: token %q: empty secret", t.Name)
		case strings.IndexFunc(t.Secret, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return fmt.Errorf("admin: token %q: the secret has spaces or control characters, which a Bearer header cannot carry", t.Name)
		case names[t.Name]:
			return fmt.Errorf("admin: token name %q is used twice", t.Name)
		case secrets[t.Secret]:
			return fmt.Errorf("admin: token %q has the same secret as another token", t.Name)
		}
		names[t.Name], secrets[t.Secret] = true, true
	}
	return nil
}

// ServeHTTP serves the admin surface.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	if !s.hostAllowed(r) {
		writeError(w, http.StatusMisdirectedRequest, "this server does not answer for host "+strconv.Quote(r.Host)+"; allow the name with --admin-allow-host")
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	}
	if q := r.URL.Query(); q.Has("token") || q.Has("access_token") {
		writeError(w, http.StatusUnauthorized, "tokens are never accepted in the query string; send Authorization: Bearer <token>")
		return
	}
	s.followReadPath(r.Context())
	if strings.HasPrefix(r.URL.Path, "/api/") {
		h.Set("Cache-Control", "no-store")
		if _, pattern := s.mux.Handler(r); pattern == "" || pattern == staticPattern {
			s.noRoute(w, r)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// hostAllowed reports whether the request's Host header names this
// server: a loopback name, the local address the connection came in on, or
// one of Config.AllowedHosts.
func (s *Server) hostAllowed(r *http.Request) bool {
	if s.hosts["*"] || s.metricsOnly {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if s.hosts[host] {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if h, _, err := net.SplitHostPort(la.String()); err == nil {
			if ip := net.ParseIP(h); ip != nil && ip.Equal(net.ParseIP(host)) {
				return true
			}
		}
	}
	return false
}

// noRoute answers an /api/ request no route matched: 405 when the path
// exists with other methods, 404 otherwise, as JSON.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" && p != staticPattern {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allowed, ", ")))
		return
	}
	writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
}

func (s *Server) routes() {
	m := http.NewServeMux()
	s.mux = m
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok\n") })
	m.HandleFunc("GET /readyz", s.readyz)
	m.HandleFunc("GET /metrics", s.metrics)
	if s.metricsOnly {
		return
	}

	m.HandleFunc("GET /api/v1/stats", s.api(false, nil, s.stats))
	m.HandleFunc("GET /api/v1/stats/history", s.api(false, nil, s.history))
	m.HandleFunc("GET /api/v1/messages", s.api(false, searchParams, s.search))
	m.HandleFunc("GET /api/v1/messages/{message_id}", s.api(false, nil, s.get))
	m.HandleFunc("POST /api/v1/messages/{message_id}/requeue", s.api(true, nil, s.requeueOne))
	m.HandleFunc("POST /api/v1/messages/{message_id}/consumed", s.api(true, nil, s.consumeOne))
	m.HandleFunc("DELETE /api/v1/messages/{message_id}", s.api(true, nil, s.discardOne))
	m.HandleFunc("POST /api/v1/messages/requeue", s.api(true, nil, s.bulk(store.ActionRequeue)))
	m.HandleFunc("POST /api/v1/messages/discard", s.api(true, nil, s.bulk(store.ActionDiscard)))
	m.HandleFunc("POST /api/v1/messages/consumed", s.api(true, nil, s.bulk(store.ActionConsumed)))
	m.HandleFunc("POST /api/v1/messages/replay", s.api(true, nil, s.bulk(store.ActionReplay)))
	m.HandleFunc("GET /api/v1/audit", s.api(false, []string{"limit"}, s.audit))
	m.HandleFunc("GET /api/v1/databases", s.api(false, nil, s.databases))

	m.Handle(staticPattern, s.static())
}

// readyz answers 200 when the database answers and Config.Ready agrees,
// else 503. Why it is not ready (which may name the database, its host
// and user) is said only to a request with a valid token; others get
// "not ready" alone.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	var err error
	if _, err = s.view().st.Now(ctx); err != nil {
		err = fmt.Errorf("database: %w", err)
	} else if s.ready != nil {
		err = s.ready(ctx)
	}
	if err == nil {
		writeText(w, http.StatusOK, "ok\n")
		return
	}
	if s.tokenHolder(r) {
		writeError(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
		return
	}
	writeError(w, http.StatusServiceUnavailable, "not ready")
}

// tokenHolder reports whether r carries one of the configured tokens
// (Authorization: Bearer); always false with none configured.
func (s *Server) tokenHolder(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if len(s.tokens) == 0 || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false
	}
	_, found := s.match(token)
	return found
}

// Run samples the counts behind /api/v1/stats/history every
// HistoryInterval until ctx is done, then returns nil. Without it the
// history stays empty; the rest of the API does not need it. It returns
// an error at once if it is already running.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("admin: Server.Run: already running")
	}
	defer s.running.Store(false)
	t := time.NewTicker(s.hist.interval)
	defer t.Stop()
	failing := false
	for {
		s.followReadPath(ctx)
		g, err := s.view().st.Gauges(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if !failing {
				s.log.Warn("outbox admin: sampling the history failed; retrying every interval", "err", err)
			}
			failing = true
		default:
			failing = false
			s.hist.add(time.Now(), g)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
