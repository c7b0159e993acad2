package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// fileConfig is the YAML config file (see the package documentation and
// docs/configuration.md). Scalars are kept as text and converted by the
// code that uses them, so a bad value is reported with its key's path.
type fileConfig struct {
	Database      string        `yaml:"database"`
	To            string        `yaml:"to"`
	WebhookSecret string        `yaml:"webhook_secret"`
	Routes        []routeConfig `yaml:"routes"`
	Relay         relayConfig   `yaml:"relay"`
	Retry         *retryConfig  `yaml:"retry"`
	Log           logConfig     `yaml:"log"`
	// Admin is the admin HTTP address (--admin); AdminTokens maps token
	// names to tokens.
	Admin       string            `yaml:"admin"`
	AdminTokens map[string]string `yaml:"admin_tokens"`
	// AdminInsecureOpen and AdminAllowedHosts back --admin-insecure-open
	// and --admin-allow-host.
	AdminInsecureOpen bool     `yaml:"admin_insecure_open"`
	AdminAllowedHosts []string `yaml:"admin_allowed_hosts"`
	// Metrics is the metrics-only HTTP address (--metrics).
	Metrics string `yaml:"metrics"`
	// KeysFile backs --keys: the key file that opens sealed payloads.
	KeysFile string `yaml:"keys_file"`
	// ClaimCheck backs --claim-check: the directory of claim-checked
	// payloads' blobs.
	ClaimCheck string `yaml:"claim_check"`
	// AdminTokenPermissions maps token names (of admin_tokens, or
	// "admin" for OUTBOX_ADMIN_TOKEN) to their permissions
	// (read-payloads).
	AdminTokenPermissions map[string][]string `yaml:"admin_token_permissions"`
	// Retention and Alerts back the relay's --retention-* and --alert-*
	// flags.
	Retention retentionConfig `yaml:"retention"`
	Alerts    alertsConfig    `yaml:"alerts"`

	// WebhookAllowShortSecret backs --webhook-allow-short-secret.
	WebhookAllowShortSecret bool `yaml:"webhook_allow_short_secret"`

	// path is the file's name, for messages; "" when there is no file.
	path string
}

type routeConfig struct {
	Pattern     string       `yaml:"pattern"`
	To          string       `yaml:"to"`
	Destination string       `yaml:"destination"`
	Name        string       `yaml:"name"`
	Secret      string       `yaml:"secret"`
	Retry       *retryConfig `yaml:"retry"`
	// The route's limits and probe interval, as the URL options of the
	// same names (they win over the URL's).
	MaxInFlight string `yaml:"max_in_flight"`
	Rate        string `yaml:"rate"`
	ProbeMin    string `yaml:"probe_min"`
	ProbeMax    string `yaml:"probe_max"`
	// MaxRetryAfter is the longest a Retry-After holds the route, as
	// the URL option max_retry_after.
	MaxRetryAfter string `yaml:"max_retry_after"`
	// MaxRetryAge is the route's retry budget by age, as the URL option
	// max_retry_age.
	MaxRetryAge string `yaml:"max_retry_age"`
	// MaxAge expires the route's messages older than this, as the URL
	// option max_age.
	MaxAge string `yaml:"max_age"`
	// Sealed is what the route does with sealed payloads (open or pass),
	// as the URL option sealed.
	Sealed string `yaml:"sealed"`
	// ClaimCheck is what the route does with claim-checked payloads
	// (inline or reference), as the URL option claim.
	ClaimCheck string `yaml:"claim"`
	// Format and CESource are the route's wire format (plain,
	// cloudevents, cloudevents-structured) and CloudEvents source, as the
	// URL options of the same names (they win over the URL's).
	Format   string `yaml:"format"`
	CESource string `yaml:"ce_source"`

	// AllowShortSecret accepts a Secret shorter than 16 bytes (see
	// outboxwebhook.Config.AllowShortSecret).
	AllowShortSecret bool `yaml:"allow_short_secret"`
}

// wire applies the route's format keys to its URL; at is the route's key
// path.
func (r *routeConfig) wire(cfg *fileConfig, at, rawURL string) (string, error) {
	if r.Format == "" && r.CESource == "" {
		return rawURL, nil
	}
	format := r.Format
	if format == "" {
		format = outboxce.FormatBinary // only the source is checked here; the URL says the format
	}
	if _, err := outboxce.Parse(format, r.CESource); err != nil {
		key := "format"
		if strings.HasPrefix(err.Error(), outboxce.ParamSource) {
			key = "ce_source"
		}
		return "", usagef("%s: %v", cfg.field(at+"."+key), err)
	}
	return outboxurl.WithCloudEvents(rawURL, r.Format, r.CESource), nil
}

// limits applies the route's limit keys over o (the URL's options); at
// is the route's key path.
func (r *routeConfig) limits(cfg *fileConfig, at string, o *outboxurl.RouteOptions) error {
	for _, kv := range []struct{ key, val string }{
		{"max_in_flight", r.MaxInFlight}, {"rate", r.Rate}, {"probe_min", r.ProbeMin}, {"probe_max", r.ProbeMax},
		{"max_retry_after", r.MaxRetryAfter}, {"max_retry_age", r.MaxRetryAge}, {"max_age", r.MaxAge}, {"sealed", r.Sealed}, {"claim", r.ClaimCheck},
	} {
		if kv.val == "" {
			continue
		}
		if err := o.Set(kv.key, kv.val); err != nil {
			return usagef("%s: %v", cfg.field(at+"."+kv.key), err)
		}
	}
	if o.ProbeMax > 0 && o.ProbeMin > o.ProbeMax {
		return usagef("%s: probe_min %s is more than probe_max %s", cfg.field(at), o.ProbeMin, o.ProbeMax)
	}
	return nil
}

type retryConfig struct {
	Base     string   `yaml:"base"`
	Cap      string   `yaml:"cap"`
	Schedule []string `yaml:"schedule"`
}

type relayConfig struct {
	ID              string `yaml:"id"`
	BatchSize       string `yaml:"batch_size"`
	LeaseTTL        string `yaml:"lease_ttl"`
	NoRouteGrace    string `yaml:"no_route_grace"`
	MaxRetryAge     string `yaml:"max_retry_age"`
	MaxAge          string `yaml:"max_age"`
	ReadPath        string `yaml:"read_path"`
	PublishTimeout  string `yaml:"publish_timeout"`
	ShutdownTimeout string `yaml:"shutdown_timeout"`
	MinPoll         string `yaml:"min_poll"`
	MaxPoll         string `yaml:"max_poll"`
	ProbeInterval   string `yaml:"probe_interval"`
	Binlog          string `yaml:"binlog"`
	MaxPayloadBytes string `yaml:"max_payload_bytes"`
	MetricsInterval string `yaml:"metrics_interval"`
	// The fleet's keys, as the relay flags of the same names (--db
	// repeated, --db-file, --fleet, --fleet-db, --fleet-workers,
	// --db-max-conns, --db-idle-close). Databases holds one database an
	// entry, "URL" or "NAME URL" as a line of a --db-file.
	Databases    []string `yaml:"databases"`
	DBFile       string   `yaml:"db_file"`
	Fleet        string   `yaml:"fleet"`
	FleetDB      string   `yaml:"fleet_db"`
	FleetWorkers string   `yaml:"fleet_workers"`
	DBMaxConns   string   `yaml:"db_max_conns"`
	DBIdleClose  string   `yaml:"db_idle_close"`
}

type retentionConfig struct {
	Sent     string `yaml:"sent"`
	Dead     string `yaml:"dead"`
	Interval string `yaml:"interval"`
	Archive  string `yaml:"archive"`
	Disabled string `yaml:"disabled"`
}

type alertsConfig struct {
	Webhook    string `yaml:"webhook"`
	PendingAge string `yaml:"pending_age"`
	Interval   string `yaml:"interval"`
	RouteDown  string `yaml:"route_down"`
}

type logConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// field names a config key in messages: "config app.yaml: relay.lease_ttl".
func (c *fileConfig) field(path string) string {
	return "config " + c.path + ": " + path
}

// loadConfig reads the config file named by flagPath, else OUTBOX_CONFIG;
// with neither it returns an empty config.
func (e *env) loadConfig(flagPath string) (*fileConfig, error) {
	path := flagPath
	if path == "" {
		path = e.getenv("OUTBOX_CONFIG")
	}
	if path == "" {
		return &fileConfig{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("config: %v", err)
	}
	cfg, err := parseConfig(path, b)
	if err != nil {
		return nil, err
	}
	for _, s := range []string{cfg.WebhookSecret, passwordOf(cfg.Database), passwordOf(cfg.To), passwordOf(cfg.Relay.FleetDB)} {
		e.addSecret(s)
	}
	for _, entry := range cfg.Relay.Databases {
		if f := strings.Fields(entry); len(f) > 0 {
			e.addSecret(passwordOf(f[len(f)-1]))
		}
	}
	for _, r := range cfg.Routes {
		e.addSecret(r.Secret)
		e.addSecret(passwordOf(r.To))
	}
	for _, tok := range cfg.AdminTokens {
		e.addSecret(tok)
	}
	return cfg, nil
}

// parseConfig decodes a config file; unknown keys and values of the wrong
// shape are usage errors naming the key.
func parseConfig(path string, b []byte) (*fileConfig, error) {
	cfg := &fileConfig{path: path}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err := dec.Decode(cfg)
	if errors.Is(err, io.EOF) {
		return cfg, nil // empty file
	}
	if err != nil {
		return nil, usagef("config %s: %s", path, describeYAMLError(b, err))
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// check validates what can be checked without the command's flags.
func (c *fileConfig) check() error {
	for i, r := range c.Routes {
		at := fmt.Sprintf("routes[%d]", i)
		if r.Pattern == "" {
			return usagef("%s: pattern is required", c.field(at))
		}
		if r.To == "" {
			return usagef("%s: to is required", c.field(at))
		}
	}
	return nil
}

var (
	yamlUnknownKey = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	yamlWrongType  = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (\\S+)$")
)

// describeYAMLError turns yaml's errors into one line that names keys by
// their path ("relay.lease_ttl") instead of Go types.
func describeYAMLError(src []byte, err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	keys := keyPaths(src)
	var parts []string
	for _, msg := range te.Errors {
		if m := yamlUnknownKey.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			parts = append(parts, fmt.Sprintf("unknown key %q (line %d)", keys.find(line, m[2]), line))
			continue
		}
		if m := yamlWrongType.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			want := "a single value"
			switch {
			case strings.HasPrefix(m[4], "[]"):
				want = "a list"
			case strings.HasPrefix(m[4], "cli.") || strings.HasPrefix(m[4], "*cli.") || strings.HasPrefix(m[4], "map"):
				want = "a mapping"
			}
			parts = append(parts, fmt.Sprintf("%s: want %s (line %d)", keys.find(line, ""), want, line))
			continue
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}

type keyPos struct {
	line int
	path string
	name string
}

type keyIndex []keyPos

// keyPaths lists every mapping key of src with its dotted path.
func keyPaths(src []byte) keyIndex {
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil {
		return nil
	}
	var out keyIndex
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				out = append(out, keyPos{line: k.Line, path: p, name: k.Value})
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(&root, "")
	return out
}

// find returns the path of the key named name on line (the last key on
// that line when name is ""), or name when none is known.
func (k keyIndex) find(line int, name string) string {
	found := ""
	for _, p := range k {
		if p.line == line && (name == "" || p.name == name) {
			found = p.path
		}
	}
	if found == "" {
		if name == "" {
			return fmt.Sprintf("line %d", line)
		}
		return name
	}
	return found
}

// parseDuration reads a Go duration ("5s", "1m30s") for the setting named
// field; negative values are refused.
func parseDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, usagef("%s: %q is not a duration (e.g. 500ms, 5s, 1m)", field, s)
	}
	if d < 0 {
		return 0, usagef("%s: %q must not be negative", field, s)
	}
	return d, nil
}

// parseCount reads a non-negative integer for the setting named field.
func parseCount(field, s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, usagef("%s: %q is not a whole number", field, s)
	}
	if n < 0 {
		return 0, usagef("%s: %q must not be negative", field, s)
	}
	return n, nil
}

// parseSchedule reads a comma-separated or listed retry schedule.
func parseSchedule(field string, items []string) ([]time.Duration, error) {
	var out []time.Duration
	for _, it := range items {
		for _, s := range strings.Split(it, ",") {
			if strings.TrimSpace(s) == "" {
				continue
			}
			d, err := parseDuration(field, s)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
	}
	return out, nil
}
