package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/adopt"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/seal"
)

// defaultAdminAddr is where 'outbox admin' listens when no address is given.
const defaultAdminAddr = "127.0.0.1:8081"

// adminShutdownTimeout bounds the wait for admin requests in flight when
// the process stops.
const adminShutdownTimeout = 5 * time.Second

// Timeouts of the admin and metrics servers: a client that sends its
// request slowly, or reads the answer slowly, cannot hold a connection
// for longer.
var (
	adminReadTimeout  = 15 * time.Second
	adminWriteTimeout = 5 * time.Minute // a bulk change over a large topic may run for minutes
)

// minTokenLen is the shortest admin token that does not draw a warning.
const minTokenLen = 16

// adminFlags are the flags of the admin surface, shared by 'outbox relay'
// and 'outbox admin'.
type adminFlags struct {
	addr         string
	insecureOpen bool
	allowHosts   listFlag
}

func (f *adminFlags) register(fs *flag.FlagSet, addrUsage string) {
	fs.StringVar(&f.addr, "admin", "", addrUsage)
	fs.BoolVar(&f.insecureOpen, "admin-insecure-open", false, "let --admin listen beyond loopback without a token, serving reads (payloads included) to anyone who reaches it")
	fs.Var(&f.allowHosts, "admin-allow-host", "`NAME` the admin server also answers for in the Host header, besides loopback names and its own address (repeatable; * for any)")
}

// adminSettings is the resolved admin surface configuration.
type adminSettings struct {
	addr   string // host:port to listen on; "" when the admin surface is off
	tokens []admin.Token
	hosts  []string // further names the Host header may carry
}

// resolveAdmin reads the admin address (--admin, OUTBOX_ADMIN_ADDR, the
// config's admin, else def), the tokens (OUTBOX_ADMIN_TOKEN, named
// "admin", and the config's admin_tokens) and the allowed hosts, and
// refuses an address beyond loopback without a token unless the operator
// asked for it (--admin-insecure-open or admin_insecure_open).
func resolveAdmin(r *resolver, cmd string, f *adminFlags, def string) (adminSettings, error) {
	s, err := resolveAdminAddr(r, cmd, f.addr, def)
	if err != nil {
		return s, err
	}
	if s.addr != "" && len(s.tokens) == 0 && !isLoopback(s.addr) && !f.insecureOpen && !r.cfg.AdminInsecureOpen {
		return s, usagef("%s: the admin server on %s would be reachable beyond loopback with no token, serving messages to anyone: set OUTBOX_ADMIN_TOKEN (or admin_tokens), or pass --admin-insecure-open", cmd, s.addr)
	}
	s.hosts = append(append(s.hosts, r.cfg.AdminAllowedHosts...), f.allowHosts...)
	if host, _, err := net.SplitHostPort(s.addr); err == nil && host != "" && net.ParseIP(host) == nil {
		s.hosts = append(s.hosts, host) // the name it was told to listen on
	}
	return s, nil
}

// resolveAdminAddr reads the admin address and the tokens.
func resolveAdminAddr(r *resolver, cmd, flagVal, def string) (adminSettings, error) {
	var s adminSettings
	addr, err := resolveAddr(r, cmd, "admin", flagVal, "OUTBOX_ADMIN_ADDR", r.cfg.Admin, def)
	if err != nil {
		return s, err
	}
	s.addr = addr
	if tok := r.env("OUTBOX_ADMIN_TOKEN"); tok != "" {
		r.e.addSecret(tok)
		s.tokens = append(s.tokens, admin.Token{Name: "admin", Secret: tok})
	}
	names := make([]string, 0, len(r.cfg.AdminTokens))
	for name := range r.cfg.AdminTokens {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		tok := r.cfg.AdminTokens[name]
		at := r.cfg.field("admin_tokens." + name)
		switch {
		case strings.TrimSpace(tok) == "":
			return s, usagef("%s: the token is empty", at)
		case name == "admin" && r.env("OUTBOX_ADMIN_TOKEN") != "":
			return s, usagef("%s: the name \"admin\" is taken by OUTBOX_ADMIN_TOKEN; pick another", at)
		}
		s.tokens = append(s.tokens, admin.Token{Name: name, Secret: tok})
	}
	return s, tokenPermissions(r, s.tokens)
}

// parseAdminAddr checks a listen address; a bare port (":8081") means
// loopback only.
func parseAdminAddr(raw string) (string, error) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(raw))
	if err != nil {
		return "", errors.New("want HOST:PORT or :PORT, e.g. :8081 or 0.0.0.0:8081")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if strings.ContainsAny(host, " /?#@") {
		return "", fmt.Errorf("host %q is not a host name or IP address", host)
	}
	return net.JoinHostPort(host, port), nil
}

// isLoopback reports whether addr listens on the loopback interface only.
func isLoopback(addr string) bool {
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// metricsRegistry is a registry with the Go runtime and process collectors,
// for the admin surface's /metrics.
func metricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// newAdminServer builds the admin handler over db.
func newAdminServer(db *dburl.DB, p *adopt.Profile, cfg *admin.Config) (*admin.Server, error) {
	var srv *admin.Server
	var err error
	if db.PGX != nil {
		srv, err = admin.New(store.Adopting(db.PGX, p), cfg)
	} else {
		srv, err = admin.New(store.Adopting(db.Std, p), cfg)
	}
	if err != nil {
		return nil, asUsage(errors.New(errorLine(err)))
	}
	return srv, nil
}

// adminListener is the admin surface bound to its address, not yet serving.
type adminListener struct {
	srv    *admin.Server
	ln     net.Listener
	http   *http.Server
	logger *slog.Logger
	// metricsOnly: the metrics listener, which keeps no history.
	metricsOnly bool
}

// listenAdmin binds the admin address, so a taken port fails before
// anything starts.
func listenAdmin(ctx context.Context, s adminSettings, srv *admin.Server, logger *slog.Logger) (*adminListener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %s: %w", s.addr, err)
	}
	if len(s.tokens) == 0 && !isLoopback(s.addr) {
		logger.Warn("outbox admin: listening beyond loopback without a token: anyone who reaches it can read messages (changes stay refused); set OUTBOX_ADMIN_TOKEN", "addr", ln.Addr().String())
	}
	for _, t := range s.tokens {
		if len(t.Secret) < minTokenLen {
			logger.Warn("outbox admin: a token is shorter than 16 characters and easy to guess; use a long random one (e.g. openssl rand -hex 32)", "token", t.Name)
		}
	}
	logger.Info("outbox admin: listening", "addr", ln.Addr().String(), "tokens", len(s.tokens))
	return &adminListener{srv: srv, ln: ln, logger: logger, http: newHTTPServer(srv, logger)}, nil
}

// newHTTPServer serves h with the admin surface's timeouts.
func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       adminReadTimeout,
		WriteTimeout:      adminWriteTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
}

// serve runs the admin surface (and its history sampler) until ctx is
// done, then shuts it down, letting requests in flight finish for a few
// seconds. failed is called if the server stops on its own.
func (a *adminListener) serve(ctx context.Context, failed func(error)) (wait func()) {
	served := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(served)
		if err := a.http.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			failed(fmt.Errorf("admin: %w", err))
		}
	}()
	go func() {
		defer close(sampled)
		if !a.metricsOnly {
			_ = a.srv.Run(ctx)
		}
	}()
	return func() {
		<-ctx.Done()
		<-sampled
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), adminShutdownTimeout)
		defer cancel()
		if err := a.http.Shutdown(stop); err != nil {
			a.logger.Warn("outbox admin: requests still running at shutdown were cut off", "err", err)
			_ = a.http.Close()
		}
		<-served
		if a.metricsOnly {
			a.logger.Info("outbox metrics: stopped")
			return
		}
		a.logger.Info("outbox admin: stopped")
	}
}

// resolveAddr reads a listen address from --name, else the variable env,
// else the config file's key name (cfgVal), else def; "" when the
// listener is off.
func resolveAddr(r *resolver, cmd, name, flagVal, env, cfgVal, def string) (string, error) {
	raw, source := flagVal, "--"+name
	switch {
	case r.set[name]:
	case r.env(env) != "":
		raw, source = r.env(env), env
	case cfgVal != "":
		raw, source = cfgVal, r.cfg.field(name)
	default:
		raw = def
	}
	if raw == "" && !r.set[name] {
		return "", nil
	}
	addr, err := parseAdminAddr(raw)
	if err != nil {
		return "", usagef("%s: %s %q: %v", cmd, source, raw, err)
	}
	return addr, nil
}

// relaySurfaces are the HTTP surfaces of a relay: the admin server and the
// metrics listener, each off when its address is "".
type relaySurfaces struct {
	admin     adminSettings
	metrics   string
	registry  *prometheus.Registry
	delivered *atomic.Int64
	running   *atomic.Bool // /readyz answers 503 while false
	// ready, when set, is the relay's own readiness (outbox.Relay.Ready):
	// /readyz answers 503 while it returns an error.
	ready func() error
	// adopt is the --adopt profile: the admin server shows its table.
	adopt string
	// keys open sealed payloads for tokens with the read-payloads
	// permission; nil: none.
	keys seal.KeyProvider
}

// readiness is the relay's /readyz check: an error while it is not
// running or its own readiness fails.
func (s *relaySurfaces) readiness(context.Context) error {
	if !s.running.Load() {
		return errors.New("the relay is not running")
	}
	if s.ready != nil {
		return s.ready()
	}
	return nil
}

// listenSurfaces binds the relay's admin server and metrics listener.
func (e *env) listenSurfaces(db *dburl.DB, s *relaySurfaces, logger *slog.Logger) ([]*adminListener, error) {
	ready := s.readiness
	var lns []*adminListener
	if s.admin.addr != "" {
		warnAuditTable(e.ctx, db.Backend().Store, logger)
		var profile *adopt.Profile
		if s.adopt != "" {
			p, err := loadProfile(s.adopt)
			if err != nil {
				return nil, err
			}
			profile = p
		}
		srv, err := newAdminServer(db, profile, &admin.Config{
			Tokens: s.admin.tokens, AllowedHosts: s.admin.hosts, Gatherer: s.registry,
			Delivered: s.delivered.Load, Logger: logger, Ready: ready, Keys: s.keys,
		})
		if err != nil {
			return nil, err
		}
		ln, err := listenAdmin(e.ctx, s.admin, srv, logger)
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
	}
	if s.metrics != "" {
		srv, err := newAdminServer(db, nil, &admin.Config{MetricsOnly: true, Gatherer: s.registry, Logger: logger, Ready: ready})
		if err != nil {
			return nil, err
		}
		ln, err := (&net.ListenConfig{}).Listen(e.ctx, "tcp", s.metrics)
		if err != nil {
			for _, l := range lns {
				_ = l.ln.Close()
			}
			return nil, fmt.Errorf("metrics: listen on %s: %w", s.metrics, err)
		}
		logger.Info("outbox metrics: listening", "addr", ln.Addr().String())
		lns = append(lns, &adminListener{srv: srv, ln: ln, logger: logger, http: newHTTPServer(srv, logger), metricsOnly: true})
	}
	return lns, nil
}

// warnAuditTable logs when the database lacks outbox_audit (migration 2),
// without which the admin API refuses changes.
func warnAuditTable(ctx context.Context, st *store.Store, logger *slog.Logger) {
	if v, err := store.SchemaVersion(ctx, st.DB()); err == nil && v < 2 {
		logger.Warn("outbox admin: the database has no outbox_audit table (schema version 1); changes will fail until 'outbox migrate' runs", "schema_version", v)
	}
}

func adminCommand() *command {
	return &command{
		name:     "admin",
		synopsis: "[--admin ADDR] [--db URL] [--config FILE] [flags]",
		summary:  "serve the admin HTTP API and web page without a relay",
		about: `Serves the admin HTTP API, /metrics, /healthz, /readyz and the web page
(docs/admin.md) over the database until SIGINT or SIGTERM, without
delivering anything: for operators and consumers next to relays that run
elsewhere. It listens on --admin, else OUTBOX_ADMIN_ADDR, else the config's
"admin", else ` + defaultAdminAddr + `; a bare port (":8081") listens on
127.0.0.1 only.

Tokens: OUTBOX_ADMIN_TOKEN (named "admin" in the audit log) and the
config's "admin_tokens" (name: token). Without a token, reads are open and
changes are refused; an address beyond loopback without a token refuses
to start unless --admin-insecure-open is given. Requests whose Host header
is not a loopback name, the listen address or an --admin-allow-host name
are answered 421.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			var af adminFlags
			af.register(fs, "listen `ADDR`: HOST:PORT or :PORT for 127.0.0.1 (default $OUTBOX_ADMIN_ADDR, else "+defaultAdminAddr+")")
			var lf relayFlags
			fs.StringVar(&lf.logLevel, "log-level", "", "`LEVEL`: debug, info, warn or error (default $OUTBOX_LOG_LEVEL, else info)")
			fs.StringVar(&lf.logFormat, "log-format", "", "`FORMAT`: text or json (default $OUTBOX_LOG_FORMAT, else text)")
			return func(e *env, pos []string) error {
				if err := noArgs("admin", pos); err != nil {
					return err
				}
				return e.adminOnly(fs, df, &af, &lf)
			}
		},
	}
}

// adminOnly serves the admin surface until a signal arrives.
func (e *env) adminOnly(fs *flag.FlagSet, df dbFlags, af *adminFlags, lf *relayFlags) error {
	cfg, err := e.loadConfig(df.config)
	if err != nil {
		return err
	}
	r := &resolver{e: e, set: setFlags(fs), cfg: cfg}
	logger, err := e.relayLogger(r, lf)
	if err != nil {
		return err
	}
	settings, err := resolveAdmin(r, "admin", af, defaultAdminAddr)
	if err != nil {
		return err
	}
	db, err := e.dialInstalled(df, cfg, "admin")
	if err != nil {
		return err
	}
	defer db.Close()
	warnAuditTable(e.ctx, db.Backend().Store, logger)
	keys, err := e.adminKeys(r)
	if err != nil {
		return err
	}
	srv, err := newAdminServer(db, nil, &admin.Config{Tokens: settings.tokens, AllowedHosts: settings.hosts, Gatherer: metricsRegistry(), Logger: logger, Keys: keys})
	if err != nil {
		return err
	}
	ln, err := listenAdmin(e.ctx, settings, srv, logger)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wait := ln.serve(ctx, cancel)
	<-ctx.Done()
	wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
