// Package cli is the outbox command line: [Main] runs one command and
// returns its exit status; cmd/outbox is a thin wrapper around it.
//
// # Commands
//
//	outbox migrate [--db URL]                          create/upgrade the tables (idempotent)
//	outbox migrate sql --dialect postgres|mysql|sqlite print the schema SQL
//	outbox relay [--to URL] [--route 'PATTERN=URL' …]  deliver until SIGINT/SIGTERM
//	outbox enqueue --topic T (--payload TEXT | --payload-file F|-)
//	outbox status [--json]
//	outbox dead list [--topic T] [--limit N] [--json]
//	outbox dead requeue (--id ID … | --topic T | --all)
//	outbox dead discard (--id ID … | --topic T | --all)
//	outbox version | outbox help [command]
//
// Commands built elsewhere (demo, bench) add themselves with [Register]
// from an init function.
//
// Exit status: 0 success, 1 failure at run time, 2 bad usage or
// configuration. Errors are one line on stderr starting "outbox: ";
// passwords and webhook secrets are never printed.
//
// # Settings
//
// Each setting is taken from its flag, else its OUTBOX_ environment
// variable, else the config file, else the default. The variables are
// OUTBOX_DATABASE_URL (--db), OUTBOX_CONFIG (--config), OUTBOX_TO (--to),
// OUTBOX_WEBHOOK_SECRET, OUTBOX_LOG_LEVEL (--log-level),
// OUTBOX_LOG_FORMAT (--log-format) and OUTBOX_BATCH_SIZE (--batch-size).
//
// # Config file
//
// --config FILE (or OUTBOX_CONFIG) names a YAML file; every key is
// optional, unknown keys are an error naming the key, and durations are Go
// duration strings ("500ms", "5s", "1m"):
//
//	database: postgres://user@host:5432/app
//	to: stdout://                   # route of last resort (pattern "*")
//	webhook_secret: whsec_...       # default secret for http(s) routes; at least 16 bytes
//	webhook_allow_short_secret: false # true: accept shorter ones on every route
//	routes:                         # tried in order after --route flags
//	  - pattern: "order.*"
//	    to: https://example.com/hooks/orders
//	    destination: orders         # optional; default the topic
//	    name: orders                # optional; label in logs; default the pattern
//	    secret: whsec_...           # optional per-route webhook secret
//	    allow_short_secret: false   # optional; true: accept one under 16 bytes
//	    retry: {base: 1s, cap: 1h, schedule: [10s, 30s, 1m, 5m]}
//	    max_retry_age: 6h           # optional; retry budget by age (as the URL option)
//	    max_age: 30m                # optional; older messages expire instead of going out (as the URL option)
//	relay:
//	  id: ""                        # default host-pid-random
//	  batch_size: 1000
//	  lease_ttl: 5s
//	  no_route_grace: 10m
//	  max_retry_age: 0s             # retry budget by age for every route; 0: attempts only
//	  max_age: 0s                   # older messages expire instead of going out, every route; 0: never
//	  publish_timeout: 15s
//	  shutdown_timeout: 10s
//	  min_poll: 5ms
//	  max_poll: 1s
//	  probe_interval: 25ms          # how often an idle relay looks for new rows
//	  binlog: auto                  # MariaDB/MySQL: follow the binary log (auto, off or a mysql:// URL)
//	  max_payload_bytes: 1048576
//	retry: {base: 1s, cap: 1h}      # default backoff; schedule: [...] also allowed
//	log: {level: info, format: text}
//
// Routes are matched in this order: --route flags, then the file's routes,
// then the route of last resort (--to, else OUTBOX_TO, else "to"). A
// route's webhook secret is its own "secret", else OUTBOX_WEBHOOK_SECRET,
// else "webhook_secret"; one shorter than 16 bytes (after whsec_ decoding)
// is refused (exit 2) unless allowed (allow_short_secret,
// webhook_allow_short_secret, --webhook-allow-short-secret), and a webhook
// route with none logs a warning at start. docs/configuration.md says the
// same for users.
package cli
