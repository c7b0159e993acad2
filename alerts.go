package outbox

import (
	"time"

	"github.com/txoutbox/outbox/internal/relay"
)

// DefaultAlertInterval is the least time between two alerts of one kind (5 min).
const DefaultAlertInterval = relay.DefaultAlertInterval

// DefaultRouteDownAlert is how long a route is down before it is alerted
// on (5 min).
const DefaultRouteDownAlert = relay.DefaultRouteDownAlert

// Kinds of alert, the "kind" field of the JSON body.
const (
	// AlertDeadLetters: messages went dead since the last such alert.
	AlertDeadLetters = "dead_letters"
	// AlertOldestPending: the oldest due message has waited longer than
	// AlertConfig.OldestPendingAge.
	AlertOldestPending = "oldest_pending_age"
	// AlertOldestPendingRecovered: after an AlertOldestPending, the oldest
	// due message is within the threshold again.
	AlertOldestPendingRecovered = "oldest_pending_age_recovered"
	// AlertRouteDown: a route has been down (see Route) for longer than
	// AlertConfig.RouteDown. The body adds "route", "down_seconds" and
	// "reason".
	AlertRouteDown = "route_down"
	// AlertRouteUp: after an AlertRouteDown, the route is up again; the
	// body adds "route" and "down_seconds" (how long it was down).
	AlertRouteUp = "route_up"
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
	// OldestPendingAge alerts when the pending message that fell due
	// first has waited longer than this for delivery at a sample
	// (RelayConfig.MetricsInterval; the gauge
	// outbox_oldest_due_age_seconds), and once more when it is back
	// under. A message counts from its available_at: a delayed message
	// from its delivery time, a retry from its next attempt, a requeued
	// dead letter from its requeue, so none of them looks stuck. The
	// alert body carries "oldest_due_age_seconds" (compared) and
	// "oldest_pending_age_seconds" (since created_at). Defaults to 0: off.
	OldestPendingAge time.Duration
	// MinInterval is the least time between two alerts of one kind. Events
	// in between are counted and reported together in the next alert.
	// Defaults to DefaultAlertInterval (5 min).
	MinInterval time.Duration
	// DisableDead turns off the alert on new dead letters. Defaults to
	// false: every dead letter is reported (rate-limited by MinInterval).
	DisableDead bool
	// RouteDown alerts when a route has been down (its destination fails
	// every delivery; see Route) for longer than this, and once more
	// when it is up again. Defaults to DefaultRouteDownAlert (5 min); a
	// negative value turns it off.
	RouteDown time.Duration
}

// AlertExample describes one dead letter in an alert.
type AlertExample struct {
	MessageID string `json:"message_id"`
	Topic     string `json:"topic"`
	Error     string `json:"error"`
}
