package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// TestConfigCheck: every bad field is named, word for word as
// outbox.RelayConfig's documentation and its users' tests know it.
func TestConfigCheck(t *testing.T) {
	pub := publishFunc(func(*publisher.Envelope) error { return nil })
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"valid", func(*Config) {}, ""},
		{"no routes", func(c *Config) { c.Routes = nil }, "outbox: RelayConfig.Routes: at least one route is required"},
		{"bad pattern", func(c *Config) { c.Routes[0].Pattern = "a.>.b" }, `outbox: RelayConfig.Routes[0]: invalid route pattern "a.>.b": '>' must be the last segment`},
		{"nil publisher", func(c *Config) { c.Routes[0].Publisher = nil }, "outbox: RelayConfig.Routes[0] (order.*): nil Publisher"},
		{"bad destination", func(c *Config) { c.Routes[0].Destination = "a b" }, `outbox: RelayConfig.Routes[0] (order.*): invalid Destination "a b"`},
		{"max in flight", func(c *Config) { c.Routes[0].MaxInFlight = -1 }, "outbox: RelayConfig.Routes[0] (order.*).MaxInFlight must not be negative"},
		{"rate", func(c *Config) { c.Routes[0].Rate = -1 }, "outbox: RelayConfig.Routes[0] (order.*).Rate must not be negative"},
		{"probe", func(c *Config) { c.Routes[0].ProbeMax = -1 }, "outbox: RelayConfig.Routes[0] (order.*): probe intervals must not be negative"},
		{"probe order", func(c *Config) { c.Routes[0].ProbeMin, c.Routes[0].ProbeMax = time.Minute, time.Second },
			"outbox: RelayConfig.Routes[0] (order.*): ProbeMin 1m0s is more than ProbeMax 1s"},
		{"route retry", func(c *Config) { c.Routes[0].Retry = &RetryPolicy{Base: -1} }, "outbox: RelayConfig.Routes[0] (order.*).Retry: Base and Cap must not be negative"},
		{"batch size", func(c *Config) { c.BatchSize = -1 }, "outbox: RelayConfig.BatchSize must not be negative"},
		{"workers", func(c *Config) { c.Workers = 65 }, "outbox: RelayConfig.Workers must be between 0 and 64"},
		{"min batch size", func(c *Config) { c.MinBatchSize = -1 }, "outbox: RelayConfig.MinBatchSize must not be negative"},
		{"poll", func(c *Config) { c.MaxPollInterval = -1 }, "outbox: RelayConfig poll intervals must not be negative"},
		{"timeouts", func(c *Config) { c.ShutdownTimeout = -1 }, "outbox: RelayConfig timeouts must not be negative"},
		{"lease", func(c *Config) { c.LeaseTTL = 100 * time.Millisecond }, "outbox: RelayConfig.LeaseTTL must be at least 500ms"},
		{"payload", func(c *Config) { c.MaxPayloadBytes = -1 }, "outbox: RelayConfig.MaxPayloadBytes must not be negative"},
		{"retry", func(c *Config) { c.Retry.Schedule = []time.Duration{time.Second, -1} }, "outbox: RelayConfig.Retry: Schedule entries must not be negative"},
		{"metrics interval", func(c *Config) { c.MetricsInterval = -1 }, "outbox: RelayConfig.MetricsInterval must not be negative"},
		{"alerts", func(c *Config) { c.Alerts = &AlertConfig{MinInterval: -1} }, "outbox: RelayConfig.Alerts.MinInterval must not be negative"},
		{"retention", func(c *Config) { c.Retention = &Retention{BatchSize: 100_001} }, "outbox: RetentionConfig.BatchSize must be between 0 and 100000"},
		{"retention disabled", func(c *Config) { c.Retention = &Retention{Disabled: true, Interval: -1} }, "outbox: RetentionConfig.Interval must not be negative"},
	} {
		cfg := Config{Routes: []Route{{Pattern: "order.*", Publisher: pub}}}
		c.edit(&cfg)
		got := ""
		if err := cfg.Check(); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: Check() = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAlertConfigCheck(t *testing.T) {
	for _, c := range []struct {
		cfg  AlertConfig
		want string
	}{
		{AlertConfig{WebhookURL: "ftp://x"}, "WebhookURL"},
		{AlertConfig{WebhookURL: "https://"}, "WebhookURL"},
		{AlertConfig{WebhookURL: "hooks.slack.com/services/T/B/secret"}, "WebhookURL"},
		{AlertConfig{OldestPendingAge: -1}, "OldestPendingAge"},
		{AlertConfig{MinInterval: -1}, "MinInterval"},
		{AlertConfig{WebhookURL: "https://hooks.example.com/x", OldestPendingAge: time.Minute}, ""},
	} {
		err := c.cfg.check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: error %v, want one naming %s", c.cfg, err, c.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("error repeats the URL: %v", err)
		}
	}
}

// TestConfigSetDefaults: zero fields get the defaults, set ones are kept
// and bounded against each other, the user's Alerts and Retention are not
// written to, and filling in twice changes nothing.
func TestConfigSetDefaults(t *testing.T) {
	alerts := &AlertConfig{RouteDown: -1}
	keep := &Retention{Policy: store.RetentionPolicy{Sent: time.Hour}}
	c := Config{BatchSize: 10, MinPollInterval: 2 * time.Second, Alerts: alerts, Retention: keep}
	c.SetDefaults()
	switch {
	case c.BatchSize != 10 || c.MinBatchSize != 10 || c.Workers != DefaultWorkers:
		t.Errorf("batch sizes %d/%d, workers %d", c.MinBatchSize, c.BatchSize, c.Workers)
	case c.MaxPollInterval != 2*time.Second || c.PublishTimeout != DefaultPublishTimeout || c.ShutdownTimeout != DefaultShutdownTimeout:
		t.Errorf("poll up to %s, timeouts %s %s", c.MaxPollInterval, c.PublishTimeout, c.ShutdownTimeout)
	case c.LeaseTTL != DefaultLeaseTTL || c.MaxPayloadBytes != DefaultMaxPayloadBytes || c.MetricsInterval != DefaultMetricsInterval || c.Logger == nil:
		t.Errorf("lease %s, payload %d, metrics %s, logger %v", c.LeaseTTL, c.MaxPayloadBytes, c.MetricsInterval, c.Logger)
	case c.Alerts == alerts || c.Alerts.MinInterval != DefaultAlertInterval || c.Alerts.RouteDown != -1 || alerts.MinInterval != 0:
		t.Errorf("alerts %+v (given %+v)", *c.Alerts, *alerts)
	case c.Retention == keep || c.Retention.Policy.Sent != time.Hour || c.Retention.Policy.Dead != DefaultRetentionDead ||
		c.Retention.BatchSize != DefaultRetentionBatchSize || c.Retention.Interval != DefaultRetentionInterval || keep.Interval != 0:
		t.Errorf("retention %+v (given %+v)", *c.Retention, *keep)
	}
	twice := c
	twice.SetDefaults()
	if *twice.Alerts != *c.Alerts || twice.Retention.Policy != c.Retention.Policy || twice.BatchSize != c.BatchSize {
		t.Errorf("filling in twice changed the configuration: %+v, then %+v", c, twice)
	}
	for _, r := range []*Retention{nil, {Disabled: true}} {
		c := Config{Retention: r, Alerts: &AlertConfig{}}
		c.SetDefaults()
		if c.Retention != nil || c.Alerts.RouteDown != DefaultRouteDownAlert {
			t.Errorf("retention %+v: %+v after the defaults, want nil (off); route down alert %s", r, c.Retention, c.Alerts.RouteDown)
		}
	}
}
