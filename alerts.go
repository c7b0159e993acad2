package outbox

import (
	"errors"
	"net/url"
	"time"

	"github.com/txoutbox/outbox/internal/relay"
)

// DefaultAlertInterval is the least time between two alerts of one kind.
const DefaultAlertInterval = 5 * time.Minute

// Kinds of alert, the "kind" field of the JSON body.
const (
	// AlertDeadLetters: messages went dead since the last such alert.
	AlertDeadLetters = "dead_letters"
	// AlertOldestPending: the oldest pending message is older than
	// AlertConfig.OldestPendingAge.
	AlertOldestPending = "oldest_pending_age"
	// AlertOldestPendingRecovered: after an AlertOldestPending, the oldest
	// pending message is within the threshold again.
	AlertOldestPendingRecovered = "oldest_pending_age_recovered"
)

// AlertConfig configures a relay's alerts. Every alert is logged at warn
// and, with a WebhookURL, posted as JSON:
//
//	{"text": "…", "kind": "dead_letters", "relay": "…", "count": 3,
//	 "examples": [{"message_id": "…", "topic": "…", "error": "…"}], "time": "…"}
//
// "text" is a one-line summary, so a Slack (or Mattermost, or Teams
// workflow) incoming webhook shows it as is; the other fields are for
// machines. Alerts go out from their own goroutine: a slow or failing
// webhook never holds up delivery, and its failures are logged.
type AlertConfig struct {
	// WebhookURL receives alerts as JSON POSTs. Defaults to "": alerts are
	// only logged.
	WebhookURL string
	// OldestPendingAge alerts when the oldest pending message (by id) is
	// older than this at a sample (RelayConfig.MetricsInterval), and once
	// more when it is back under. A message delayed on purpose counts from
	// its creation too. Defaults to 0: off.
	OldestPendingAge time.Duration
	// MinInterval is the least time between two alerts of one kind. Events
	// in between are counted and reported together in the next alert.
	// Defaults to DefaultAlertInterval (5 min).
	MinInterval time.Duration
	// DisableDead turns off the alert on new dead letters. Defaults to
	// false: every dead letter is reported (rate-limited by MinInterval).
	DisableDead bool
}

func (c *AlertConfig) validate() error {
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

// AlertExample describes one dead letter in an alert.
type AlertExample struct {
	MessageID string `json:"message_id"`
	Topic     string `json:"topic"`
	Error     string `json:"error"`
}

// engine is the checked configuration with its defaults filled in.
func (c *AlertConfig) engine() *relay.AlertConfig {
	if c == nil {
		return nil
	}
	e := relay.AlertConfig(*c)
	if e.MinInterval == 0 {
		e.MinInterval = DefaultAlertInterval
	}
	return &e
}
