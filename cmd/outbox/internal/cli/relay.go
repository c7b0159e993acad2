package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxbinlog"
	"github.com/txoutbox/outbox/internal/adopt"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

func relayCommand() *command {
	return &command{
		name:     "relay",
		synopsis: "[--to URL] [--route 'PATTERN=URL' …] [--config FILE] [--admin ADDR] [flags]",
		summary:  "deliver messages until SIGINT/SIGTERM",
		about: `Delivers committed messages to their destinations until SIGINT or SIGTERM,
then finishes or releases its in-flight batch and exits 0. Run as many
relays as you like over one database; they share the work.

Routes map topic patterns to destination URLs: "order.*" matches one
segment, "order.>" the rest, "*" anything. The first matching route wins:
--route flags in the order given, then the config file's routes, then --to
(or OUTBOX_TO, or the config's "to") as the route of last resort. A topic
no route matches goes dead with "no route". At least one route is needed.

Any destination URL also takes the route's own options, which the relay
takes out of the URL: max_in_flight=N, rate=N/s (or N/m, N/h),
probe_min=1s and probe_max=30s (the probes of a route that is down: one
whose destination fails every delivery, new messages included; it is
sent nothing else and charged nothing until a probe goes through), and
max_retry_after=1h (the longest a Retry-After, or a broker's throttling
delay, holds the route; when a hold ends the route gets one message, and
the rest once that one is answered without another wait).
max_retry_age=6h (or --max-retry-age, relay.max_retry_age, for every
route) bounds a message's retrying by age as well as by its
max_attempts, whichever comes first: a message still failing that long
after its created_at, or whose next retry would come later, goes dead
with "retry budget (6h0m0s) spent after N attempts". At start the relay
logs each route's retry horizon ("retry horizon": the longest a message
of 10 attempts is retried, bounded by max_retry_age), to compare with the
consumers' dedupe window (docs/consumers.md). By default the horizon of
10 attempts is 25.2 h to 33.6 h.
max_age=30m (or --max-age, relay.max_age, for every route) expires a
message older than that (since its created_at) when the relay would
publish it: it is not sent, it becomes expired, and its key goes on.
sealed=open (the relay opens payloads sealed at enqueue with the keys of
--keys FILE and publishes them plain: the default) or sealed=pass (it
publishes them sealed, for consumers to open; docs/security.md).
claim=inline (the relay fetches payloads kept in the blob store of
--claim-check DIR or s3://BUCKET/PREFIX at enqueue and publishes them:
the default) or
claim=reference (it publishes the reference headers and no payload, for
consumers to fetch; docs/claim-check.md).
format=cloudevents sends CloudEvents 1.0 in binary mode (http, https,
kafka, amqp, nats, mqtt; webhooks also take format=cloudevents-structured),
with ce_source=URI as the source attribute (docs/cloudevents.md).

Destinations: ` + strings.Join(outboxurl.Supported, ", ") + `. Webhooks are signed with
the route's "secret" from the config file, else OUTBOX_WEBHOOK_SECRET, else
the config's "webhook_secret"; a route with none sends unsigned requests,
with a warning at start. A secret shorter than 16 bytes (after whsec_
decoding) is refused unless --webhook-allow-short-secret, the config's
"webhook_allow_short_secret: true" or the route's "allow_short_secret:
true" allows it.

--admin ADDR (or OUTBOX_ADMIN_ADDR, or the config's "admin") also serves the
admin HTTP API, /metrics, /healthz, /readyz and the web page (docs/admin.md);
a bare port (":8081") listens on 127.0.0.1 only. Tokens: OUTBOX_ADMIN_TOKEN
(named "admin" in the audit log) and the config's "admin_tokens". Beyond
loopback it needs a token, or --admin-insecure-open.

Several --db, or --db-file FILE (a line: URL or NAME URL; # comments;
read again when it changes), serve many databases; relays given the same
list and --fleet-db share them, each database served by one relay at a
time (docs/fleet.md). Metrics, logs and alerts then name the database.

--metrics ADDR (or OUTBOX_METRICS_ADDR, or the config's "metrics") serves
only /metrics, /healthz and /readyz, for scrapers: no API and no payloads,
so it may listen on any address without a token.

--adopt PROFILE delivers from a local message table the application
already writes instead of outbox_messages, and writes each outcome back
in the table's own vocabulary: laravel (local_messages), spring
(t_local_message), codes (local_message), or FILE.yaml mapping any other
table (docs/adopt.md; 'outbox adopt check' says whether a table fits).
One relay at a time serves the table, the others stand by; 'outbox
migrate' makes the lease table they share. With --admin the admin API and
page show the table; of its changes they take requeue of one dead row.`,
		setup: relaySetup,
	}
}

// relayFlags holds the relay command's flags.
type relayFlags struct {
	db              dbFlags
	listenDB        string
	keys            string
	claimCheck      string
	to              string
	routes          listFlag
	id              string
	batchSize       int
	maxPayloadBytes int
	leaseTTL        time.Duration
	noRouteGrace    time.Duration
	publishTimeout  time.Duration
	shutdownTimeout time.Duration
	minPoll         time.Duration
	maxPoll         time.Duration
	probeInterval   time.Duration
	noProbe         bool
	binlog          string
	retryBase       time.Duration
	retryCap        time.Duration
	retrySchedule   string
	maxRetryAge     time.Duration
	maxAge          time.Duration
	readPath        string
	logLevel        string
	logFormat       string
	admin           adminFlags
	metrics         string
	observe         observeFlags
	retention       retentionFlags
	adopt           string
	fleet           fleetFlags
	webhook         webhookFlags
}

func relaySetup(fs *flag.FlagSet) func(*env, []string) error {
	f := newRelayFlags(fs)
	return func(e *env, pos []string) error {
		if err := noArgs("relay", pos); err != nil {
			return err
		}
		return e.relay(fs, f)
	}
}

// newRelayFlags declares the relay's flags on fs.
func newRelayFlags(fs *flag.FlagSet) *relayFlags {
	f := &relayFlags{}
	f.db.registerMany(fs)
	f.fleet.register(fs)
	fs.StringVar(&f.to, "to", "", "route of last resort: destination `URL` for topics no other route matches (default $OUTBOX_TO)")
	fs.Var(&f.routes, "route", "route `PATTERN=URL`, e.g. 'order.*=https://example.com/hooks' (repeatable; first match wins)")
	fs.StringVar(&f.claimCheck, "claim-check", "", "`DIR` (or s3://BUCKET/PREFIX?region=R, with endpoint=URL and path_style=true for S3-compatible servers) holding the blobs of claim-checked payloads, fetched for claim=inline routes and swept of orphans (default $OUTBOX_CLAIM_CHECK_DIR, else the config's claim_check; docs/claim-check.md)")
	fs.StringVar(&f.keys, "keys", "", "key `FILE` that opens sealed payloads (default $OUTBOX_KEYS_FILE, else the config's keys_file; see outbox keys)")
	fs.StringVar(&f.listenDB, "listen-db", "", "PostgreSQL `URL` of the server itself for the relay's LISTEN connection, when --db leads to a pooler in transaction mode (default $OUTBOX_LISTEN_DATABASE_URL)")
	fs.StringVar(&f.id, "id", "", "relay instance `ID` in logs and the lease table (default host-pid-random)")
	fs.IntVar(&f.batchSize, "batch-size", 0, fmt.Sprintf("most messages read per round (default $OUTBOX_BATCH_SIZE, else %d)", outbox.DefaultBatchSize))
	fs.IntVar(&f.maxPayloadBytes, "max-payload-bytes", 0, fmt.Sprintf("larger payloads go dead instead of being published (default %d)", outbox.DefaultMaxPayloadBytes))
	fs.DurationVar(&f.leaseTTL, "lease-ttl", 0, fmt.Sprintf("partition lease `DURATION`; a dead relay is replaced after this (default %s)", outbox.DefaultLeaseTTL))
	fs.DurationVar(&f.noRouteGrace, "no-route-grace", 0, fmt.Sprintf("how long a message no route matches waits while another live relay routes its topic, e.g. in a rolling deploy (default %s)", outbox.DefaultNoRouteGrace))
	fs.DurationVar(&f.publishTimeout, "publish-timeout", 0, fmt.Sprintf("bound on one publish (default %s)", outbox.DefaultPublishTimeout))
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 0, fmt.Sprintf("time to finish the in-flight batch on shutdown (default %s)", outbox.DefaultShutdownTimeout))
	fs.DurationVar(&f.minPoll, "min-poll", 0, fmt.Sprintf("first wait after an empty read (default %s)", outbox.DefaultMinPollInterval))
	fs.DurationVar(&f.maxPoll, "max-poll", 0, fmt.Sprintf("longest wait between reads when idle (default %s)", outbox.DefaultMaxPollInterval))
	fs.DurationVar(&f.probeInterval, "probe-interval", 0, fmt.Sprintf("how often an idle relay asks the database whether a row was added (its highest id) and reads at once when one was: the wait of a message from any producer between polls (default %s)", outbox.DefaultProbeInterval))
	fs.BoolVar(&f.noProbe, "no-probe", false, "no change probe: rows from producers that send no signal wait for a poll (at most --max-poll)")
	fs.StringVar(&f.binlog, "binlog", "", "MySQL/MariaDB: `auto` follows the --db server's binary log, when it writes one, to look for new rows as producers commit instead of probing every --probe-interval; off; or the mysql:// URL of an account with REPLICATION SLAVE and BINLOG MONITOR (or REPLICATION CLIENT) to follow it with (default $OUTBOX_BINLOG, else the config's binlog, else auto)")
	fs.DurationVar(&f.retryBase, "retry-base", 0, "exponential backoff instead of the default curve: first ceiling, doubling per failure up to --retry-cap, full jitter (default: the curve, at most 1s, 32s, 4m3s, … n⁵ s after failure n)")
	fs.DurationVar(&f.retryCap, "retry-cap", 0, fmt.Sprintf("largest backoff, of the default curve or of --retry-base's (default %s)", outbox.DefaultRetryCap))
	fs.StringVar(&f.retrySchedule, "retry-schedule", "", "fixed backoff `LIST` instead of exponential, e.g. 10s,30s,1m (the last repeats)")
	fs.DurationVar(&f.maxAge, "max-age", 0, "a message older than this when it would be published expires instead (default none; a route's max_age wins)")
	fs.StringVar(&f.readPath, "read-path", "", "`PATH`: table, or snapshot to read new messages between transaction snapshots, writing nothing for a delivered one (PostgreSQL, after outbox migrate --read-path snapshot; docs/snapshot-read.md) (default the config's read_path, else table)")
	fs.DurationVar(&f.maxRetryAge, "max-retry-age", 0, "retry budget by age: a message still failing this long after its creation goes dead, whatever attempts it has left (default none; a route's max_retry_age wins)")
	fs.StringVar(&f.logLevel, "log-level", "", "`LEVEL`: debug, info, warn or error (default $OUTBOX_LOG_LEVEL, else info)")
	fs.StringVar(&f.logFormat, "log-format", "", "`FORMAT`: text or json (default $OUTBOX_LOG_FORMAT, else text)")
	f.admin.register(fs, "serve the admin API, metrics and web page on `ADDR`: HOST:PORT, or :PORT for 127.0.0.1 (default $OUTBOX_ADMIN_ADDR; off when unset)")
	fs.StringVar(&f.metrics, "metrics", "", "serve only /metrics, /healthz and /readyz on `ADDR`, for scrapers: HOST:PORT, or :PORT for 127.0.0.1 (default $OUTBOX_METRICS_ADDR; off when unset)")
	f.observe.register(fs)
	f.retention.register(fs)
	fs.StringVar(&f.adopt, "adopt", "", adoptUsage)
	f.webhook.register(fs)
	return f
}

// resolver picks each setting from its flag, then its OUTBOX_ variable,
// then the config file.
type resolver struct {
	e   *env
	set map[string]bool
	cfg *fileConfig
}

func (r *resolver) duration(flagName string, flagVal time.Duration, envName, cfgKey, cfgVal string) (time.Duration, error) {
	if r.set[flagName] {
		if flagVal < 0 {
			return 0, usagef("relay: --%s must not be negative", flagName)
		}
		return flagVal, nil
	}
	if v := r.env(envName); v != "" {
		return parseDuration(envName, v)
	}
	if cfgVal != "" {
		return parseDuration(r.cfg.field(cfgKey), cfgVal)
	}
	return 0, nil
}

func (r *resolver) count(flagName string, flagVal int, envName, cfgKey, cfgVal string) (int, error) {
	if r.set[flagName] {
		if flagVal < 0 {
			return 0, usagef("relay: --%s must not be negative", flagName)
		}
		return flagVal, nil
	}
	if v := r.env(envName); v != "" {
		return parseCount(envName, v)
	}
	if cfgVal != "" {
		return parseCount(r.cfg.field(cfgKey), cfgVal)
	}
	return 0, nil
}

func (r *resolver) text(flagName, flagVal, envName, cfgVal string) string {
	if r.set[flagName] {
		return flagVal
	}
	if v := r.env(envName); v != "" {
		return v
	}
	return cfgVal
}

func (r *resolver) env(name string) string {
	if name == "" {
		return ""
	}
	return r.e.getenv(name)
}

// routeSpec is a route before its publisher is opened.
type routeSpec struct {
	source      string // where it was given, for messages
	pattern     string
	url         string
	destination string
	name        string
	secret      string
	allowShort  bool // the secret may be shorter than outboxwebhook.MinSecretBytes
	retry       *outbox.RetryPolicy
	limits      outboxurl.RouteOptions
}

// relay builds the relay from flags, environment and config, and runs it
// until the context is cancelled or a signal arrives.
func (e *env) relay(fs *flag.FlagSet, f *relayFlags) error {
	cfg, err := e.loadConfig(f.db.config)
	if err != nil {
		return err
	}
	r := &resolver{e: e, set: setFlags(fs), cfg: cfg}

	logger, err := e.relayLogger(r, f)
	if err != nil {
		return err
	}
	routeClientLogs(logger)
	rc, err := resolveRelayConfig(r, f)
	if err != nil {
		return err
	}
	if err := r.flagsFromConfig(fs); err != nil {
		return err
	}
	if err := f.fleet.fromConfig(r); err != nil {
		return err
	}
	f.observe.getenv, f.retention.getenv = e.getenv, e.getenv
	for _, s := range f.observe.secrets() {
		e.addSecret(s)
	}
	if err := f.observe.apply(rc); err != nil {
		return err
	}
	if err := f.retention.apply(rc); err != nil {
		return err
	}
	profile, err := adoptProfile(f.adopt, rc)
	if err != nil {
		return err
	}
	surfaces, err := resolveRelaySurfaces(r, f)
	if err != nil {
		return err
	}
	specs, err := routeSpecs(r, f)
	if err != nil {
		return err
	}
	closePubs, err := e.openRoutes(specs, rc, logger)
	defer closePubs()
	if err != nil {
		return err
	}
	warnUnsignedWebhooks(specs, logger)
	if err := e.relayKeys(r, f.keys, rc); err != nil {
		return err
	}
	if err := relayClaimCheck(r, f.claimCheck, rc); err != nil {
		return err
	}
	rc.Logger = logger
	if err := e.checkBinlog(r, f); err != nil {
		return err
	}
	if f.fleet.active(&f.db) {
		return e.relayFleet(r, f, rc, profile, surfaces, specs)
	}
	return e.relayOne(r, f, rc, profile, surfaces, specs)
}

// resolveRelaySurfaces resolves the addresses of the relay's admin
// surface and metrics listener (either may be off).
func resolveRelaySurfaces(r *resolver, f *relayFlags) (relaySurfaces, error) {
	adminCfg, err := resolveAdmin(r, "relay", &f.admin, "")
	if err != nil {
		return relaySurfaces{}, err
	}
	if f.adopt != "" && adminCfg.addr != "" && f.fleet.active(&f.db) {
		return relaySurfaces{}, usagef("relay: --adopt over a fleet does not serve the admin API and page (each database's table differs); use --metrics, and outbox status --adopt or outbox dead list --adopt")
	}
	metricsAddr, err := resolveAddr(r, "relay", "metrics", f.metrics, "OUTBOX_METRICS_ADDR", r.cfg.Metrics, "")
	if err != nil {
		return relaySurfaces{}, err
	}
	return relaySurfaces{admin: adminCfg, metrics: metricsAddr}, nil
}

// relayOne runs the relay over one database until a signal arrives. rc
// is the relay's configuration, surfaces the addresses of its admin
// surface and metrics listener.
func (e *env) relayOne(r *resolver, f *relayFlags, rc *outbox.RelayConfig, profile *adopt.Profile, surfaces relaySurfaces, specs []routeSpec) error {
	logger := rc.Logger
	db, err := e.dialInstalled(f.db, r.cfg, "relay")
	if err != nil {
		return err
	}
	defer db.Close()
	closeListen, err := e.listenDB(r, f, db, rc)
	if err != nil {
		return err
	}
	defer closeListen()
	if err := e.binlog(r, f, db, rc); err != nil {
		return err
	}
	// With the admin surface or the metrics listener on, the relay's
	// metrics and the Go and process collectors go to the registry
	// /metrics serves, and the relay's deliveries feed the history's rate.
	var registry *prometheus.Registry
	var delivered atomic.Int64
	if surfaces.admin.addr != "" || surfaces.metrics != "" {
		registry = metricsRegistry()
		rc.Metrics = registry
		rc.OnBatch = func(b outbox.BatchReport) { delivered.Add(int64(b.Sent)) }
	}
	relay, err := newRelay(db, profile, rc)
	if err != nil {
		return asUsage(fmt.Errorf("relay: %s", errorLine(err)))
	}

	// The relay counts as running from just before Run until shutdown
	// begins; /readyz answers 503 outside that.
	var running atomic.Bool
	surfaces.registry, surfaces.delivered, surfaces.running, surfaces.ready = registry, &delivered, &running, relay.Ready
	surfaces.adopt, surfaces.keys = f.adopt, rc.Keys
	lns, err := e.listenSurfaces(db, &surfaces, logger)
	if err != nil {
		return err
	}

	for _, s := range specs {
		logger.Info("outbox relay: route", "pattern", s.pattern, "to", outboxurl.Redact(s.url), "from", s.source)
	}

	return e.runRelay(relay.Run, lns, &running)
}

// flagsFromConfig sets the retention, alert and metrics flags that neither
// the command line nor their OUTBOX_ variable gave from the config file,
// so they resolve as flag, then variable, then file.
func (r *resolver) flagsFromConfig(fs *flag.FlagSet) error {
	c := r.cfg
	for _, s := range []struct{ flag, env, key, val string }{
		{"retention-sent", "OUTBOX_RETENTION_SENT", "retention.sent", c.Retention.Sent},
		{"retention-dead", "OUTBOX_RETENTION_DEAD", "retention.dead", c.Retention.Dead},
		{"retention-interval", "OUTBOX_RETENTION_INTERVAL", "retention.interval", c.Retention.Interval},
		{"archive", "OUTBOX_ARCHIVE", "retention.archive", c.Retention.Archive},
		{"no-retention", "OUTBOX_NO_RETENTION", "retention.disabled", c.Retention.Disabled},
		{"alert-webhook", "OUTBOX_ALERT_WEBHOOK", "alerts.webhook", c.Alerts.Webhook},
		{"alert-pending-age", "", "alerts.pending_age", c.Alerts.PendingAge},
		{"alert-interval", "", "alerts.interval", c.Alerts.Interval},
		{"alert-route-down", "", "alerts.route_down", c.Alerts.RouteDown},
		{"metrics-interval", "", "relay.metrics_interval", c.Relay.MetricsInterval},
	} {
		if s.val == "" || r.set[s.flag] || (s.env != "" && r.env(s.env) != "") {
			continue
		}
		if err := fs.Set(s.flag, strings.TrimSpace(s.val)); err != nil {
			want := "a duration (e.g. 30s, 24h)"
			if bf, ok := fs.Lookup(s.flag).Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				want = "true or false"
			}
			return usagef("%s: %q is not %s", c.field(s.key), s.val, want)
		}
	}
	return nil
}

// resolveRelayConfig resolves the tuning settings.
func resolveRelayConfig(r *resolver, f *relayFlags) (*outbox.RelayConfig, error) {
	c := r.cfg.Relay
	rc := &outbox.RelayConfig{ID: r.text("id", f.id, "", c.ID)}
	var err error
	if rc.BatchSize, err = r.count("batch-size", f.batchSize, "OUTBOX_BATCH_SIZE", "relay.batch_size", c.BatchSize); err != nil {
		return nil, err
	}
	if rc.MaxPayloadBytes, err = r.count("max-payload-bytes", f.maxPayloadBytes, "", "relay.max_payload_bytes", c.MaxPayloadBytes); err != nil {
		return nil, err
	}
	durations := []struct {
		flag   string
		val    time.Duration
		key    string
		cfgVal string
		dst    *time.Duration
	}{
		{"lease-ttl", f.leaseTTL, "relay.lease_ttl", c.LeaseTTL, &rc.LeaseTTL},
		{"no-route-grace", f.noRouteGrace, "relay.no_route_grace", c.NoRouteGrace, &rc.NoRouteGrace},
		{"publish-timeout", f.publishTimeout, "relay.publish_timeout", c.PublishTimeout, &rc.PublishTimeout},
		{"shutdown-timeout", f.shutdownTimeout, "relay.shutdown_timeout", c.ShutdownTimeout, &rc.ShutdownTimeout},
		{"min-poll", f.minPoll, "relay.min_poll", c.MinPoll, &rc.MinPollInterval},
		{"max-poll", f.maxPoll, "relay.max_poll", c.MaxPoll, &rc.MaxPollInterval},
		{"probe-interval", f.probeInterval, "relay.probe_interval", c.ProbeInterval, &rc.ProbeInterval},
		{"max-retry-age", f.maxRetryAge, "relay.max_retry_age", c.MaxRetryAge, &rc.MaxRetryAge},
		{"max-age", f.maxAge, "relay.max_age", c.MaxAge, &rc.MaxAge},
	}
	for _, d := range durations {
		if *d.dst, err = r.duration(d.flag, d.val, "", d.key, d.cfgVal); err != nil {
			return nil, err
		}
	}
	if f.noProbe {
		rc.ProbeInterval = -1
	}
	switch path := r.text("read-path", f.readPath, "", c.ReadPath); path {
	case "", "table":
	case "snapshot":
		rc.SnapshotRead = true
	default:
		return nil, usagef("relay: read path %q: table or snapshot", path)
	}
	if rc.LeaseTTL > 0 && rc.LeaseTTL < 500*time.Millisecond {
		return nil, usagef("relay: lease TTL %s is too short (at least 500ms)", rc.LeaseTTL)
	}
	var base, capD string
	var list []string
	if r.cfg.Retry != nil {
		base, capD, list = r.cfg.Retry.Base, r.cfg.Retry.Cap, r.cfg.Retry.Schedule
	}
	if rc.Retry.Base, err = r.duration("retry-base", f.retryBase, "", "retry.base", base); err != nil {
		return nil, err
	}
	if rc.Retry.Cap, err = r.duration("retry-cap", f.retryCap, "", "retry.cap", capD); err != nil {
		return nil, err
	}
	field := r.cfg.field("retry.schedule")
	if r.set["retry-schedule"] {
		field, list = "--retry-schedule", []string{f.retrySchedule}
	}
	if rc.Retry.Schedule, err = parseSchedule(field, list); err != nil {
		return nil, err
	}
	return rc, nil
}

// routeSpecs collects the routes in matching order: --route flags, the
// config file's routes, then the route of last resort.
func routeSpecs(r *resolver, f *relayFlags) ([]routeSpec, error) {
	defaultSecret := r.e.getenv("OUTBOX_WEBHOOK_SECRET")
	if defaultSecret == "" {
		defaultSecret = r.cfg.WebhookSecret
	}
	r.e.addSecret(defaultSecret)
	var specs []routeSpec
	for _, arg := range f.routes {
		pattern, u, ok := strings.Cut(arg, "=")
		pattern = strings.TrimSpace(pattern)
		if !ok || pattern == "" || strings.TrimSpace(u) == "" {
			return nil, usagef("relay: --route %q: want PATTERN=URL, e.g. 'order.*=https://example.com/hooks'", outboxurl.Redact(arg))
		}
		s := routeSpec{
			source:  fmt.Sprintf("--route %q", pattern+"="+outboxurl.Redact(u)),
			pattern: pattern, url: strings.TrimSpace(u), secret: defaultSecret,
			allowShort: f.webhook.allowShortSecret || r.cfg.WebhookAllowShortSecret,
		}
		if err := s.splitLimits(); err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	for i, rc := range r.cfg.Routes {
		at := fmt.Sprintf("routes[%d]", i)
		s := routeSpec{
			source:  r.cfg.field(at),
			pattern: rc.Pattern, url: rc.To, destination: rc.Destination, name: rc.Name, secret: rc.Secret,
			allowShort: rc.AllowShortSecret || f.webhook.allowShortSecret || r.cfg.WebhookAllowShortSecret,
		}
		if s.secret == "" {
			s.secret = defaultSecret
		}
		if err := s.splitLimits(); err != nil {
			return nil, err
		}
		u, err := rc.wire(r.cfg, at, s.url)
		if err != nil {
			return nil, err
		}
		s.url = u
		if err := rc.limits(r.cfg, at, &s.limits); err != nil {
			return nil, err
		}
		if rc.Retry != nil {
			p, err := retryPolicy(r.cfg, at+".retry", rc.Retry)
			if err != nil {
				return nil, err
			}
			s.retry = p
		}
		if s.destination != "" && (strings.ContainsAny(s.destination, "*>") || outbox.ValidatePattern(s.destination) != nil) {
			return nil, usagef("%s.destination: %q is not a topic-like name (dot-separated letters, digits, '_', '-', ':')", s.source, s.destination)
		}
		specs = append(specs, s)
	}
	if to := r.text("to", f.to, "OUTBOX_TO", r.cfg.To); to != "" {
		source := "--to"
		switch {
		case r.set["to"]:
		case r.e.getenv("OUTBOX_TO") != "":
			source = "OUTBOX_TO"
		default:
			source = r.cfg.field("to")
		}
		r.e.addSecret(passwordOf(to))
		s := routeSpec{source: source, pattern: "*", url: to, secret: defaultSecret,
			allowShort: f.webhook.allowShortSecret || r.cfg.WebhookAllowShortSecret}
		if err := s.splitLimits(); err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	if len(specs) == 0 {
		return nil, usagef("relay: no routes: give --to URL, --route 'PATTERN=URL' or routes in the config file (--config)")
	}
	for _, s := range specs {
		r.e.addSecret(passwordOf(s.url))
		if err := outbox.ValidatePattern(s.pattern); err != nil {
			return nil, usagef("relay: %s: %v", s.source, err)
		}
	}
	if err := checkWebhookSecrets(specs); err != nil {
		return nil, err
	}
	return specs, nil
}

// splitLimits takes the route options (max_in_flight, rate, probe_min,
// probe_max, max_retry_after, max_retry_age, sealed, claim) out of the spec's URL.
func (s *routeSpec) splitLimits() error {
	u, o, err := outboxurl.SplitRouteOptions(s.url)
	if err != nil {
		return usagef("relay: %s: %s", s.source, errorLine(err))
	}
	s.url, s.limits = u, o
	return nil
}

// retryPolicy converts a config retry block.
func retryPolicy(cfg *fileConfig, at string, rc *retryConfig) (*outbox.RetryPolicy, error) {
	p := &outbox.RetryPolicy{}
	var err error
	if rc.Base != "" {
		if p.Base, err = parseDuration(cfg.field(at+".base"), rc.Base); err != nil {
			return nil, err
		}
	}
	if rc.Cap != "" {
		if p.Cap, err = parseDuration(cfg.field(at+".cap"), rc.Cap); err != nil {
			return nil, err
		}
	}
	if p.Schedule, err = parseSchedule(cfg.field(at+".schedule"), rc.Schedule); err != nil {
		return nil, err
	}
	return p, nil
}

// relayLogger builds the relay's logger on stderr, with secrets scrubbed.
func (e *env) relayLogger(r *resolver, f *relayFlags) (*slog.Logger, error) {
	var level slog.Level
	switch lv := strings.ToLower(r.text("log-level", f.logLevel, "OUTBOX_LOG_LEVEL", r.cfg.Log.Level)); lv {
	case "debug":
		level = slog.LevelDebug
	case "", "info":
		level = slog.LevelInfo
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, usagef("relay: log level %q: want debug, info, warn or error", lv)
	}
	opts := &slog.HandlerOptions{Level: level}
	w := &redactWriter{e: e, w: e.stderr}
	switch lf := strings.ToLower(r.text("log-format", f.logFormat, "OUTBOX_LOG_FORMAT", r.cfg.Log.Format)); lf {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, usagef("relay: log format %q: want text or json", lf)
	}
}

// redactWriter scrubs the run's secrets from each log record it writes.
type redactWriter struct {
	e *env
	w io.Writer
}

func (w *redactWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, w.e.redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// openRoutes opens one publisher per destination URL and secret (routes to
// one place share it) and appends the routes to rc. A destination down at
// start is not an error: its route goes down and is probed like one that
// goes down later, and the other routes are served. The returned function
// closes every publisher opened, also after an error.
func (e *env) openRoutes(specs []routeSpec, rc *outbox.RelayConfig, logger *slog.Logger) (func(), error) {
	pubs := map[string]outbox.Publisher{}
	closeAll := func() {
		for _, p := range pubs {
			_ = p.Close()
		}
	}
	for _, s := range specs {
		key := s.url + "\x00" + s.secret + "\x00" + s.limits.MaxRetryAfter.String()
		p, ok := pubs[key]
		if !ok {
			var err error
			p, err = outboxurl.Open(s.url, &outboxurl.Options{WebhookSecret: s.secret, WebhookAllowShortSecret: s.allowShort, WebhookMaxRetryAfter: s.limits.MaxRetryAfter, Timeout: rc.PublishTimeout, Stdout: e.stdout, Logger: logger})
			if err != nil {
				// A destination that does not answer is no error here:
				// its publisher connects in the background and the route
				// goes down at its first publish. What is left is the
				// configuration (URL, TLS files) or a server refusing
				// the relay.
				return closeAll, asUsage(fmt.Errorf("relay: %s: %s", s.source, errorLine(err)))
			}
			pubs[key] = p
		}
		rc.Routes = append(rc.Routes, outbox.Route{
			Pattern: s.pattern, Publisher: p, Destination: s.destination, Name: s.name, Retry: s.retry,
			MaxInFlight: s.limits.MaxInFlight, Rate: s.limits.Rate, ProbeMin: s.limits.ProbeMin, ProbeMax: s.limits.ProbeMax,
			MaxRetryAfter: s.limits.MaxRetryAfter, MaxRetryAge: s.limits.MaxRetryAge, MaxAge: s.limits.MaxAge, Sealed: s.limits.Sealed,
			ClaimCheck: s.limits.ClaimCheck,
		})
	}
	return closeAll, nil
}

// routeName is how the command line names a route in a message: by its
// name, else its pattern.
func routeName(rt outbox.Route) string {
	if rt.Name != "" {
		return rt.Name
	}
	return rt.Pattern
}

// runRelay runs relay until SIGINT or SIGTERM (a second signal ends a
// shutdown that takes too long), with the admin surface, when there is
// one, outliving the relay so /readyz and /metrics stay up while it
// finishes its batch. running is true from just before Run until shutdown
// begins.
func (e *env) runRelay(run func(context.Context) error, lns []*adminListener, running *atomic.Bool) error {
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default handling so a second
	// one ends a shutdown that takes too long.
	stopAfter := context.AfterFunc(ctx, stop)
	defer stopAfter()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	running.Store(true)
	stopReady := context.AfterFunc(ctx, func() { running.Store(false) })
	defer stopReady()
	for _, ln := range lns {
		// The admin surface and the metrics listener stop after the
		// relay, so /readyz and /metrics stay up while it finishes its
		// batch.
		adminCtx, stopAdmin := context.WithCancel(context.WithoutCancel(ctx))
		wait := ln.serve(adminCtx, cancel)
		defer func() {
			stopAdmin()
			wait()
		}()
	}
	if err := run(ctx); err != nil {
		return err
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err // the admin server failed
	}
	return nil
}

// binlog gives a relay over MySQL or MariaDB a feed of the server's
// binary log (--binlog, else OUTBOX_BINLOG, else the config's
// relay.binlog): auto (the default) follows it over --db's URL, a URL
// over that account, off not at all. The relay says when it cannot
// follow it (no binary log, no rights) and probes instead.
func (e *env) binlog(r *resolver, f *relayFlags, db *dburl.DB, rc *outbox.RelayConfig) error {
	raw := r.text("binlog", f.binlog, "OUTBOX_BINLOG", r.cfg.Relay.Binlog)
	auto := raw == "" || raw == "auto"
	switch {
	case raw == "off":
		return nil
	case auto:
		if db.Dialect != store.MySQL {
			return nil
		}
		var err error
		if raw, err = e.databaseURL(f.db, r.cfg); err != nil {
			return err
		}
	}
	feed, err := outboxbinlog.OpenURL(raw)
	switch {
	case err != nil && auto:
		rc.Logger.Info("outbox relay: cannot follow the binlog; probing every probe_interval", "err", e.redact(err.Error()))
		return nil
	case err != nil:
		return usagef("relay: --binlog: %s (want auto, off or a mysql:// URL)", e.redact(strings.TrimPrefix(err.Error(), "outboxbinlog: ")))
	}
	rc.ChangeFeed = feed
	return nil
}

// checkBinlog refuses, before any database is opened, a --binlog that is
// neither auto, off nor (for one MySQL database, not a fleet) a mysql://
// URL.
func (e *env) checkBinlog(r *resolver, f *relayFlags) error {
	v := r.text("binlog", f.binlog, "OUTBOX_BINLOG", r.cfg.Relay.Binlog)
	fleet := f.fleet.active(&f.db)
	if err := checkBinlogMode(v, fleet); err != nil || fleet || v == "" || v == "auto" || v == "off" {
		return err
	}
	e.addSecret(passwordOf(v))
	raw, err := e.databaseURL(f.db, r.cfg)
	if err != nil {
		return err
	}
	if d, _, err := dburl.Parse(raw); err == nil && d != store.MySQL {
		return usagef("relay: --binlog needs a MySQL or MariaDB database, not %s", d)
	}
	return nil
}

// checkBinlogMode refuses a --binlog value that is neither auto, off nor
// (for one database, not a fleet) a mysql:// URL.
func checkBinlogMode(v string, fleet bool) error {
	switch {
	case v == "" || v == "auto" || v == "off":
		return nil
	case fleet:
		return usagef("relay: --binlog %q: with several databases, auto (each database's binary log over its own URL) or off", redactedMode(v))
	case !strings.HasPrefix(v, "mysql://") && !strings.HasPrefix(v, "mariadb://"):
		return usagef("relay: --binlog %q: want auto, off or a mysql:// URL", redactedMode(v))
	}
	return nil
}

// redactedMode is a --binlog value as it may be shown: a URL without its
// password.
func redactedMode(v string) string {
	if strings.Contains(v, "://") {
		return dburl.Redact(v)
	}
	return v
}

// listenDB opens --listen-db (else OUTBOX_LISTEN_DATABASE_URL), when
// given, as the relay's LISTEN connection: a URL of the PostgreSQL
// server itself for a relay whose --db goes through PgBouncer. It
// returns what closes it.
func (e *env) listenDB(r *resolver, f *relayFlags, db *dburl.DB, rc *outbox.RelayConfig) (func(), error) {
	raw := r.text("listen-db", f.listenDB, "OUTBOX_LISTEN_DATABASE_URL", "")
	if raw == "" {
		return func() {}, nil
	}
	e.addSecret(passwordOf(raw))
	if db.Dialect != store.Postgres {
		return nil, usagef("relay: --listen-db needs a PostgreSQL database, not %s", db.Dialect)
	}
	ldb, err := e.dial(raw)
	if err != nil {
		return nil, fmt.Errorf("relay: --listen-db: %s", errorLine(err))
	}
	if ldb.Dialect != store.Postgres || ldb.Pooler {
		ldb.Close()
		return nil, usagef("relay: --listen-db must lead to the PostgreSQL server itself, not to a pooler or another database")
	}
	rc.Listener = ldb.PGX
	return ldb.Close, nil
}
