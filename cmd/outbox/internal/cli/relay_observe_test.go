package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
)

func TestObserveFlagsApply(t *testing.T) {
	t.Parallel()
	const hook = "https://hooks.slack.com/services/T0/B0/s3cret"
	const down = outbox.DefaultRouteDownAlert
	for _, c := range []struct {
		name string
		args []string
		env  string
		err  string // "" when valid
		want outbox.RelayConfig
	}{
		{name: "none", want: outbox.RelayConfig{Alerts: &outbox.AlertConfig{RouteDown: down, DisableDead: true}}},
		{name: "route-down alert off", args: []string{"--alert-route-down", "0"}},
		{name: "route-down alert sooner", args: []string{"--alert-route-down", "30s"},
			want: outbox.RelayConfig{Alerts: &outbox.AlertConfig{RouteDown: 30 * time.Second, DisableDead: true}}},
		{name: "webhook", args: []string{"--alert-webhook", hook, "--alert-interval", "1m"},
			want: outbox.RelayConfig{Alerts: &outbox.AlertConfig{WebhookURL: hook, MinInterval: time.Minute, RouteDown: down}}},
		{name: "webhook from env", env: hook, args: []string{"--alert-pending-age", "10m", "--metrics-interval", "30s"},
			want: outbox.RelayConfig{MetricsInterval: 30 * time.Second, Alerts: &outbox.AlertConfig{WebhookURL: hook, OldestPendingAge: 10 * time.Minute, RouteDown: down}}},
		{name: "flag wins over env", env: "https://other.example/x", args: []string{"--alert-webhook", hook},
			want: outbox.RelayConfig{Alerts: &outbox.AlertConfig{WebhookURL: hook, RouteDown: down}}},
		{name: "log-only age alert", args: []string{"--alert-pending-age", "5m", "--alert-route-down", "0"},
			want: outbox.RelayConfig{Alerts: &outbox.AlertConfig{OldestPendingAge: 5 * time.Minute, RouteDown: -1}}},
		{name: "metrics interval alone", args: []string{"--metrics-interval", "5s", "--alert-route-down", "0"}, want: outbox.RelayConfig{MetricsInterval: 5 * time.Second}},
		{name: "negative route-down", args: []string{"--alert-route-down", "-1s"}, err: "--alert-route-down must not be negative"},
		{name: "not http", args: []string{"--alert-webhook", "ftp://u:s3cret@x/"}, err: "relay: --alert-webhook: want an http:// or https:// URL"},
		{name: "no scheme", args: []string{"--alert-webhook", "hooks.slack.com/services/T0/B0/s3cret"}, err: "--alert-webhook: want"},
		{name: "bad env", env: "s3cret", err: "relay: OUTBOX_ALERT_WEBHOOK: want"},
		{name: "negative age", args: []string{"--alert-pending-age", "-1s"}, err: "--alert-pending-age must not be negative"},
		{name: "negative interval", args: []string{"--alert-webhook", hook, "--alert-interval", "-1s"}, err: "--alert-interval must not be negative"},
		{name: "short metrics interval", args: []string{"--metrics-interval", "10ms"}, err: "--metrics-interval 10ms is too short"},
		{name: "negative metrics interval", args: []string{"--metrics-interval", "-1s"}, err: "--metrics-interval must not be negative"},
		{name: "interval without alerts", args: []string{"--alert-interval", "1m", "--alert-route-down", "0"}, err: "--alert-interval needs --alert-webhook"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("relay", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o := &observeFlags{getenv: func(k string) string {
				if k == "OUTBOX_ALERT_WEBHOOK" {
					return c.env
				}
				return ""
			}}
			o.register(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			var cfg outbox.RelayConfig
			err := o.apply(&cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || exitStatus(err) != ExitUsage {
					t.Fatalf("error %v, want a usage error containing %q", err, c.err)
				}
				if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %q repeats the URL or spans lines", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MetricsInterval != c.want.MetricsInterval || (cfg.Alerts == nil) != (c.want.Alerts == nil) ||
				(cfg.Alerts != nil && *cfg.Alerts != *c.want.Alerts) {
				t.Fatalf("config %+v alerts %+v, want %+v alerts %+v", cfg, cfg.Alerts, c.want, c.want.Alerts)
			}
			if c.want.Alerts != nil && c.want.Alerts.WebhookURL != "" {
				if s := o.secrets(); len(s) != 1 || s[0] != c.want.Alerts.WebhookURL {
					t.Errorf("secrets %v", s)
				}
			}
		})
	}
}
