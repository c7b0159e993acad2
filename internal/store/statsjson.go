package store

import (
	"strings"
	"time"
)

// StatsJSON is the stats document: the counts, the routes' health and
// the live relays, as GET /api/v1/stats and 'outbox status --json' show
// them.
type StatsJSON struct {
	Pending                 int64       `json:"pending"`
	Sent                    int64       `json:"sent"`
	Consumed                int64       `json:"consumed"`
	Dead                    int64       `json:"dead"`
	Expired                 int64       `json:"expired"` // expires_at came before delivery
	OldestPendingAgeSeconds float64     `json:"oldest_pending_age_seconds"`
	OldestDueAgeSeconds     float64     `json:"oldest_due_age_seconds"`
	Topics                  []TopicJSON `json:"topics"`
	// Routes are the routes a live relay has seen down since it started;
	// a route not listed has been up all along.
	Routes []RouteJSON `json:"routes"`
	// Relays are the relays seen within the last minute with their route
	// patterns, and RoutesAgree whether they all route alike; a relay
	// with no route for a topic another one routes leaves its messages
	// waiting (see docs/configuration.md).
	Relays      []RelayJSON `json:"relays"`
	RoutesAgree bool        `json:"routes_agree"`
}

// RouteJSON is a route's health.
type RouteJSON struct {
	Route string `json:"route"`
	// State is "down" while any live relay sees the route down, else "up".
	State string `json:"state"`
	// Since is when the route entered State (RFC 3339, UTC, by database
	// time); ForSeconds is how long ago that was.
	Since      string   `json:"since"`
	ForSeconds float64  `json:"for_seconds"`
	Reason     string   `json:"reason,omitempty"`
	Relays     []string `json:"relays"`
}

// TopicJSON is the count of a topic's messages in one status.
type TopicJSON struct {
	Topic  string `json:"topic"`
	Status string `json:"status"`
	Count  int64  `json:"count"`
}

// NewStatsJSON is the stats document of the counts st, the routes'
// health (as SummarizeRoutes gives it) read at the time at, and the
// live relays (LiveRelays). A route's since is truncated to prec.
func NewStatsJSON(st Stats, routes []RouteHealth, live []Relay, at time.Time, prec time.Duration) *StatsJSON {
	out := &StatsJSON{
		Pending: st.Pending, Sent: st.Sent, Consumed: st.Consumed, Dead: st.Dead, Expired: st.Expired,
		OldestPendingAgeSeconds: st.OldestPendingAge.Seconds(),
		OldestDueAgeSeconds:     st.OldestDueAge.Seconds(),
		Topics:                  make([]TopicJSON, 0, len(st.ByTopic)),
		Routes:                  make([]RouteJSON, 0, len(routes)),
		Relays:                  RelaysJSON(live),
	}
	for _, tc := range st.ByTopic {
		out.Topics = append(out.Topics, TopicJSON(tc))
	}
	for _, rh := range routes {
		out.Routes = append(out.Routes, RouteJSON{
			Route: rh.Route, State: rh.State, Reason: rh.Reason, Relays: strings.Split(rh.Relay, ","),
			Since: at.Add(-rh.For).UTC().Truncate(prec).Format(time.RFC3339Nano), ForSeconds: rh.For.Seconds(),
		})
	}
	_, out.RoutesAgree = LiveRelays(live)
	return out
}
