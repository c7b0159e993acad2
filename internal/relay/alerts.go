package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/txoutbox/outbox/internal/redact"
)

// alertTimeout bounds one webhook POST.
const alertTimeout = 10 * time.Second

// maxAlertExamples is how many dead letters an alert describes.
const maxAlertExamples = 5

// Kinds of alert, the "kind" field of the JSON body (outbox.Alert*).
const (
	AlertDeadLetters            = "dead_letters"
	AlertOldestPending          = "oldest_pending_age"
	AlertOldestPendingRecovered = "oldest_pending_age_recovered"
	AlertRouteDown              = "route_down"
	AlertRouteUp                = "route_up"
)

// Alert defaults (outbox.DefaultAlertInterval, DefaultRouteDownAlert).
const (
	DefaultAlertInterval  = 5 * time.Minute
	DefaultRouteDownAlert = 5 * time.Minute
)

// AlertConfig is outbox.AlertConfig (the same fields).
type AlertConfig struct {
	WebhookURL       string
	OldestPendingAge time.Duration
	MinInterval      time.Duration
	DisableDead      bool
	// RouteDown: alert when a route has been down this long; 0 is
	// DefaultRouteDownAlert until the defaults are filled in, and never
	// after; negative: never.
	RouteDown time.Duration
}

// check names a bad field; Config.Check puts the "RelayConfig.Alerts."
// in front. The URL is never repeated: it may hold a secret.
func (c *AlertConfig) check() error {
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("WebhookURL: want an http:// or https:// URL with a host")
		}
	}
	switch {
	case c.OldestPendingAge < 0:
		return errors.New("OldestPendingAge must not be negative")
	case c.MinInterval < 0:
		return errors.New("MinInterval must not be negative")
	}
	return nil
}

// withDefaults is a copy of c with its defaults filled in; nil (no
// alerts) stays nil.
func (c *AlertConfig) withDefaults() *AlertConfig {
	if c == nil {
		return nil
	}
	e := *c
	orDefault(&e.MinInterval, DefaultAlertInterval)
	orDefault(&e.RouteDown, DefaultRouteDownAlert)
	return &e
}

// AlertExample describes one dead letter in an alert.
type AlertExample struct {
	MessageID string `json:"message_id"`
	Topic     string `json:"topic"`
	Error     string `json:"error"`
}

// alert is one alert's JSON body.
type alert struct {
	Text  string `json:"text"`
	Kind  string `json:"kind"`
	Relay string `json:"relay"`
	// Database names the database of a fleet the alert is about.
	Database string `json:"database,omitempty"`
	// Count is the number of dead letters the alert reports, or the
	// pending messages at the sample for the oldest-pending kinds.
	Count int64 `json:"count"`
	// OldestDueAgeSeconds is the age the backlog alerts compare: how long
	// the oldest due message has waited. OldestPendingAgeSeconds is that
	// sample's oldest pending message's age since created_at.
	OldestDueAgeSeconds     *float64       `json:"oldest_due_age_seconds,omitempty"`
	OldestPendingAgeSeconds *float64       `json:"oldest_pending_age_seconds,omitempty"`
	Examples                []AlertExample `json:"examples,omitempty"`
	// Route, DownSeconds and Reason describe a route-health alert.
	Route       string   `json:"route,omitempty"`
	DownSeconds *float64 `json:"down_seconds,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Time        string   `json:"time"`
}

// alerter keeps the alert state; rounds and the sampler report to it
// without blocking, and run sends what is due.
type alerter struct {
	cfg      AlertConfig
	relay    string
	database string // "" unless the relay serves one database of a fleet
	log      *slog.Logger
	client   *http.Client
	poke     chan struct{}

	mu         sync.Mutex
	dead       alertKind
	age        alertKind
	ageHigh    bool          // the last sample was over the threshold
	ageAlerted bool          // an AlertOldestPending went out since it was last under
	recovered  bool          // an AlertOldestPendingRecovered is due
	lastAge    time.Duration // oldest due age at the last sample
	lastMade   time.Duration // oldest pending age (since created_at) at the last sample
	lastCount  int64         // pending messages at the last sample
	routes     map[string]*routeAlert
}

// routeAlert is the alert state of one route that is or was down.
type routeAlert struct {
	down    bool
	since   time.Time
	reason  string
	alerted bool // an AlertRouteDown went out for this outage
	upDue   bool // an AlertRouteUp is due
	downFor time.Duration
}

// alertKind is the rate-limit state of one kind of alert.
type alertKind struct {
	sent     time.Time // when one last went out
	count    int64     // events not yet reported
	examples []AlertExample
}

func newAlerter(cfg AlertConfig, relay string, log *slog.Logger) *alerter {
	return &alerter{
		cfg:    cfg,
		relay:  relay,
		log:    log,
		client: &http.Client{Timeout: alertTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()},
		poke:   make(chan struct{}, 1),
	}
}

func (a *alerter) wake() {
	select {
	case a.poke <- struct{}{}:
	default:
	}
}

// deadLetters reports messages that went dead.
func (a *alerter) deadLetters(n int, examples []AlertExample) {
	if a.cfg.DisableDead || n == 0 {
		return
	}
	a.mu.Lock()
	a.dead.count += int64(n)
	for _, ex := range examples {
		if len(a.dead.examples) < maxAlertExamples {
			ex.Error = truncate(ex.Error, 500)
			a.dead.examples = append(a.dead.examples, ex)
		}
	}
	a.mu.Unlock()
	a.wake()
}

// pendingAge reports a sample: how long the oldest due message has
// waited (what the threshold applies to), the oldest pending message's age
// since created_at, and the pending count.
func (a *alerter) pendingAge(age, made time.Duration, pending int64) {
	if a.cfg.OldestPendingAge <= 0 {
		return
	}
	a.mu.Lock()
	a.lastAge, a.lastMade, a.lastCount = age, made, pending
	if age > a.cfg.OldestPendingAge {
		a.ageHigh = true
		a.age.count++
	} else if a.ageHigh {
		a.ageHigh = false
		a.age.count = 0
		if a.ageAlerted {
			a.recovered = true
		}
	}
	a.mu.Unlock()
	a.wake()
}

// routeHealth reports a route going down (at, reason) or up.
func (a *alerter) routeHealth(route string, down bool, at time.Time, reason string) {
	if a.cfg.RouteDown <= 0 {
		return
	}
	a.mu.Lock()
	if a.routes == nil {
		a.routes = map[string]*routeAlert{}
	}
	ra := a.routes[route]
	switch {
	case down:
		a.routes[route] = &routeAlert{down: true, since: at, reason: reason}
	case ra != nil && ra.down:
		ra.down, ra.downFor = false, at.Sub(ra.since)
		ra.upDue = ra.alerted
		if !ra.upDue {
			delete(a.routes, route)
		}
	}
	a.mu.Unlock()
	a.wake()
}

// routeAlerts takes the route-health alerts due at now (a.mu held) and
// says when the next one falls due (0: none pending).
func (a *alerter) routeAlerts(now time.Time, stamp string) ([]alert, time.Duration) {
	var out []alert
	var wait time.Duration
	for name, ra := range a.routes {
		switch {
		case ra.upDue:
			secs := ra.downFor.Seconds()
			out = append(out, alert{
				Text: fmt.Sprintf("outbox: route %s is up again after %s down (relay %s)", name, roundAge(ra.downFor), a.relay),
				Kind: AlertRouteUp, Relay: a.relay, Route: name, DownSeconds: &secs, Time: stamp,
			})
			delete(a.routes, name)
		case ra.down && !ra.alerted && now.Sub(ra.since) >= a.cfg.RouteDown:
			ra.alerted = true
			secs := now.Sub(ra.since).Seconds()
			out = append(out, alert{
				Text: fmt.Sprintf("outbox: route %s has been down for %s (threshold %s; relay %s): %s",
					name, roundAge(now.Sub(ra.since)), a.cfg.RouteDown, a.relay, truncate(ra.reason, 200)),
				Kind: AlertRouteDown, Relay: a.relay, Route: name, DownSeconds: &secs, Reason: truncate(ra.reason, 500), Time: stamp,
			})
		case ra.down && !ra.alerted:
			if w := a.cfg.RouteDown - now.Sub(ra.since); wait == 0 || w < wait {
				wait = w
			}
		}
	}
	return out, wait
}

// due takes the alerts that may go out at now, and says how long until
// the next one held back by the rate limit may (0: none is held back).
func (a *alerter) due(now time.Time) ([]alert, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []alert
	var wait time.Duration
	ready := func(k *alertKind) bool {
		if k.count == 0 {
			return false
		}
		if k.sent.IsZero() || now.Sub(k.sent) >= a.cfg.MinInterval {
			k.sent = now
			return true
		}
		if w := a.cfg.MinInterval - now.Sub(k.sent); wait == 0 || w < wait {
			wait = w
		}
		return false
	}
	stamp := now.UTC().Format(time.RFC3339)
	if ready(&a.dead) {
		out = append(out, alert{
			Text:     deadText(a.relay, a.dead.count, a.dead.examples),
			Kind:     AlertDeadLetters,
			Relay:    a.relay,
			Count:    a.dead.count,
			Examples: a.dead.examples,
			Time:     stamp,
		})
		a.dead.count, a.dead.examples = 0, nil
	}
	if a.ageHigh && ready(&a.age) {
		out = append(out, a.ageAlert(AlertOldestPending, stamp,
			fmt.Sprintf("outbox: the oldest due message has waited %s for delivery (threshold %s; %d pending; relay %s)",
				roundAge(a.lastAge), a.cfg.OldestPendingAge, a.lastCount, a.relay)))
		a.age.count = 0
		a.ageAlerted = true
	}
	if a.recovered {
		out = append(out, a.ageAlert(AlertOldestPendingRecovered, stamp,
			fmt.Sprintf("outbox: the oldest due message is back under %s (now %s; %d pending; relay %s)",
				a.cfg.OldestPendingAge, roundAge(a.lastAge), a.lastCount, a.relay)))
		a.recovered, a.ageAlerted = false, false
	}
	routes, rwait := a.routeAlerts(now, stamp)
	out = append(out, routes...)
	if rwait > 0 && (wait == 0 || rwait < wait) {
		wait = rwait
	}
	return out, wait
}

// ageAlert is a backlog alert of kind with the last sample's figures.
func (a *alerter) ageAlert(kind, stamp, text string) alert {
	due, made := a.lastAge.Seconds(), a.lastMade.Seconds()
	return alert{
		Text: text, Kind: kind, Relay: a.relay, Count: a.lastCount,
		OldestDueAgeSeconds: &due, OldestPendingAgeSeconds: &made, Time: stamp,
	}
}

func deadText(relay string, n int64, examples []AlertExample) string {
	var b strings.Builder
	b.WriteString("outbox: ")
	b.WriteString(strconv.FormatInt(n, 10))
	if n == 1 {
		b.WriteString(" new dead letter")
	} else {
		b.WriteString(" new dead letters")
	}
	b.WriteString(" (relay " + relay + ")")
	if len(examples) > 0 {
		ex := examples[0]
		b.WriteString(", e.g. " + ex.Topic + " " + ex.MessageID + ": " + truncate(ex.Error, 200))
	}
	return b.String()
}

func roundAge(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// run sends alerts as they fall due until ctx is done. Counts still held
// back by the rate limit at the end are logged.
func (a *alerter) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer a.client.CloseIdleConnections()
	for {
		alerts, wait := a.due(time.Now())
		for _, al := range alerts {
			a.send(ctx, al)
		}
		if wait == 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			a.mu.Lock()
			dead := a.dead.count
			a.mu.Unlock()
			if dead > 0 {
				a.log.Warn("outbox relay: dead letters not yet alerted when the relay stopped", "relay", a.relay, "count", dead)
			}
			return
		case <-a.poke:
		case <-timer.C:
		}
	}
}

// send logs al and posts it to the webhook.
func (a *alerter) send(ctx context.Context, al alert) {
	if a.database != "" {
		al.Database = a.database
		al.Text += " (database " + a.database + ")"
	}
	attrs := []any{"relay", a.relay, "kind", al.Kind, "count", al.Count}
	if al.OldestDueAgeSeconds != nil {
		attrs = append(attrs, "oldest_due_age_seconds", *al.OldestDueAgeSeconds)
	}
	if al.Route != "" {
		attrs = append(attrs, "route", al.Route)
	}
	if al.OldestPendingAgeSeconds != nil {
		attrs = append(attrs, "oldest_pending_age_seconds", *al.OldestPendingAgeSeconds)
	}
	a.log.Warn("outbox relay: alert", append(attrs, "text", al.Text)...)
	if a.cfg.WebhookURL == "" {
		return
	}
	body, err := json.Marshal(al)
	if err != nil {
		return
	}
	if err := a.post(ctx, body); err != nil && ctx.Err() == nil {
		a.log.Warn("outbox relay: alert webhook failed", "relay", a.relay, "kind", al.Kind, "webhook", a.host(), "err", err)
	}
}

func (a *alerter) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, alertTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return errors.New("bad webhook URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "outbox-relay")
	resp, err := a.client.Do(req)
	if err != nil {
		// The URL may carry the webhook's secret (Slack's does, in its
		// path): report the cause without it.
		var ue *url.Error
		if errors.As(err, &ue) {
			return errors.New(redact.Text(ue.Err.Error()))
		}
		return errors.New("request failed")
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errors.New("webhook answered " + resp.Status)
	}
	return nil
}

// host is the webhook's host, for logs (its path may be a secret).
func (a *alerter) host() string {
	u, err := url.Parse(a.cfg.WebhookURL)
	if err != nil {
		return ""
	}
	return u.Host
}
