package cli

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/txoutbox/outbox"
)

// observeFlags are the relay's alerting and metrics-sampling flags.
type observeFlags struct {
	webhook         string
	pendingAge      time.Duration
	alertInterval   time.Duration
	routeDown       time.Duration
	metricsInterval time.Duration

	// getenv reads OUTBOX_ALERT_WEBHOOK; nil means os.Getenv.
	getenv func(string) string
}

// register declares the flags on fs.
func (o *observeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.webhook, "alert-webhook", "", "post alerts (new dead letters, old backlog) as JSON to `URL`; Slack-compatible (default $OUTBOX_ALERT_WEBHOOK)")
	fs.DurationVar(&o.pendingAge, "alert-pending-age", 0, "alert when the oldest due message has waited longer than `DURATION` for delivery (default off)")
	fs.DurationVar(&o.routeDown, "alert-route-down", outbox.DefaultRouteDownAlert, "alert when a route has been down (its destination failing every delivery) longer than `DURATION`; 0 turns it off")
	fs.DurationVar(&o.alertInterval, "alert-interval", 0, fmt.Sprintf("least `DURATION` between two alerts of a kind; events in between are summed (default %s)", outbox.DefaultAlertInterval))
	fs.DurationVar(&o.metricsInterval, "metrics-interval", 0, fmt.Sprintf("how often to sample pending and dead counts for metrics and alerts, `DURATION` (default %s)", outbox.DefaultMetricsInterval))
}

// webhookURL is the alert webhook from the flag, else the environment, and
// where it came from.
func (o *observeFlags) webhookURL() (string, string) {
	if o.webhook != "" {
		return o.webhook, "--alert-webhook"
	}
	getenv := o.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv("OUTBOX_ALERT_WEBHOOK"), "OUTBOX_ALERT_WEBHOOK"
}

// secrets are values never to print: the webhook URL (Slack's carries its
// token in the path).
func (o *observeFlags) secrets() []string {
	if u, _ := o.webhookURL(); u != "" {
		return []string{u}
	}
	return nil
}

// apply validates the flags and sets them on cfg. The route-down alert is
// on unless --alert-route-down is 0; the dead-letter alert is on when a
// webhook or a pending-age threshold is given. Without a webhook alerts
// are only logged.
func (o *observeFlags) apply(cfg *outbox.RelayConfig) error {
	hook, from := o.webhookURL()
	if hook != "" {
		u, err := url.Parse(hook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("relay: %s: want an http:// or https:// URL with a host", from)
		}
	}
	switch {
	case o.pendingAge < 0:
		return usagef("relay: --alert-pending-age must not be negative")
	case o.routeDown < 0:
		return usagef("relay: --alert-route-down must not be negative")
	case o.alertInterval < 0:
		return usagef("relay: --alert-interval must not be negative")
	case o.metricsInterval < 0:
		return usagef("relay: --metrics-interval must not be negative")
	case o.metricsInterval > 0 && o.metricsInterval < time.Second:
		return usagef("relay: --metrics-interval %s is too short (at least 1s)", o.metricsInterval)
	case o.alertInterval > 0 && hook == "" && o.pendingAge == 0 && o.routeDown == 0:
		return usagef("relay: --alert-interval needs --alert-webhook (or OUTBOX_ALERT_WEBHOOK), --alert-pending-age or --alert-route-down")
	}
	cfg.MetricsInterval = o.metricsInterval
	routeDown := o.routeDown
	if routeDown == 0 {
		routeDown = -1 // off
	}
	if hook != "" || o.pendingAge > 0 || routeDown > 0 {
		cfg.Alerts = &outbox.AlertConfig{WebhookURL: hook, OldestPendingAge: o.pendingAge, MinInterval: o.alertInterval,
			RouteDown: routeDown, DisableDead: hook == "" && o.pendingAge == 0}
	}
	return nil
}
