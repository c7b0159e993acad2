package outboxurl

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// RouteOptions are the per-route settings any destination URL may carry
// in its query, whatever its scheme: ?max_in_flight=16&rate=200/s&
// probe_min=1s&probe_max=30s&max_retry_after=10m&max_retry_age=6h. They are the relay's, not the
// destination's: SplitRouteOptions takes them out of the URL before it is
// opened.
type RouteOptions struct {
	// MaxInFlight is max_in_flight: the most messages of the route being
	// published at once (outbox.Route.MaxInFlight).
	MaxInFlight int
	// Rate is rate, in messages per second (outbox.Route.Rate); the URL
	// writes it N/s, N/m or N/h (or a bare N, per second).
	Rate float64
	// ProbeMin and ProbeMax are probe_min and probe_max, the interval
	// between probes of a route that is down (outbox.Route.ProbeMin).
	ProbeMin, ProbeMax time.Duration
	// MaxRetryAfter is max_retry_after, the longest a failure asking for
	// a wait (HTTP Retry-After) holds the route
	// (outbox.Route.MaxRetryAfter, outboxwebhook.Config.MaxRetryAfter).
	MaxRetryAfter time.Duration
	// MaxRetryAge is max_retry_age, the retry budget by age: a message
	// retried this long after its creation goes dead
	// (outbox.Route.MaxRetryAge).
	MaxRetryAge time.Duration
	// MaxAge is max_age: a message older than this (since its creation)
	// when the relay would publish it expires instead (outbox.Route.MaxAge).
	MaxAge time.Duration
	// Sealed is sealed, what the route does with payloads sealed at
	// enqueue: "open" or "pass" (outbox.Route.Sealed).
	Sealed string
	// ClaimCheck is claim, what the route does with payloads kept in a
	// blob store at enqueue: "inline" or "reference"
	// (outbox.Route.ClaimCheck).
	ClaimCheck string
}

// routeOptionNames are the query parameters SplitRouteOptions takes.
var routeOptionNames = []string{"max_in_flight", "rate", "probe_min", "probe_max", "max_retry_after", "max_retry_age", "max_age", "sealed", "claim"}

// SplitRouteOptions returns rawURL without its route options, and the
// options. The rest of the URL is kept byte for byte. Errors are one line
// naming the option and never contain credentials.
func SplitRouteOptions(rawURL string) (string, RouteOptions, error) {
	var o RouteOptions
	rest, taken := cutParams(rawURL, isRouteOption)
	for _, p := range taken {
		name, value := p[0], p[1]
		v, err := url.QueryUnescape(value)
		if err == nil {
			err = o.set(name, v)
		}
		if err != nil {
			return "", o, fmt.Errorf("destination %s: %s=%q: %v", Redact(rawURL), name, value, err)
		}
	}
	if o.ProbeMax > 0 && o.ProbeMin > o.ProbeMax {
		return "", o, fmt.Errorf("destination %s: probe_min %s is more than probe_max %s", Redact(rawURL), o.ProbeMin, o.ProbeMax)
	}
	return rest, o, nil
}

// cutParams returns rawURL without the query parameters take selects, and
// those parameters' names and raw values in order; the rest of the URL is
// kept byte for byte.
func cutParams(rawURL string, take func(name string) bool) (string, [][2]string) {
	base, query, ok := strings.Cut(rawURL, "?")
	if !ok {
		return rawURL, nil
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	var keep []string
	var taken [][2]string
	for _, part := range strings.Split(query, "&") {
		name, value, _ := strings.Cut(part, "=")
		if !take(name) {
			keep = append(keep, part)
			continue
		}
		taken = append(taken, [2]string{name, value})
	}
	out := base
	if len(keep) > 0 {
		out += "?" + strings.Join(keep, "&")
	}
	if hasFragment {
		out += "#" + fragment
	}
	return out, taken
}

func isRouteOption(name string) bool {
	for _, n := range routeOptionNames {
		if name == n {
			return true
		}
	}
	return false
}

// Set applies one route option by its name (max_in_flight, rate,
// probe_min, probe_max, max_retry_after, max_retry_age, max_age, sealed, claim), as the URL or the configuration file writes it.
func (o *RouteOptions) Set(name, value string) error {
	if !isRouteOption(name) {
		return fmt.Errorf("unknown route option %q (want one of %s)", name, strings.Join(routeOptionNames, ", "))
	}
	return o.set(name, value)
}

func (o *RouteOptions) set(name, v string) error {
	v = strings.TrimSpace(v)
	switch name {
	case "max_in_flight":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("want a whole number of messages, at least 1")
		}
		o.MaxInFlight = n
	case "rate":
		r, err := ParseRate(v)
		if err != nil {
			return err
		}
		o.Rate = r
	case "sealed":
		if v != "open" && v != "pass" {
			return fmt.Errorf("want open (the relay opens sealed payloads) or pass (it publishes them sealed)")
		}
		o.Sealed = v
	case "claim":
		if v != "inline" && v != "reference" {
			return fmt.Errorf("want inline (the relay fetches claim-checked payloads and publishes them) or reference (it publishes the reference)")
		}
		o.ClaimCheck = v
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration, e.g. 1s or 30s")
		}
		switch name {
		case "probe_min":
			o.ProbeMin = d
		case "probe_max":
			o.ProbeMax = d
		case "max_retry_age":
			o.MaxRetryAge = d
		case "max_age":
			o.MaxAge = d
		default:
			o.MaxRetryAfter = d
		}
	}
	return nil
}

// ParseRate reads a rate written N/s, N/m, N/h or N (per second) and
// returns it per second.
func ParseRate(v string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(v), "/")
	per := map[string]float64{"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}[unit]
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || per == 0 || n <= 0 || n > 1e9 {
		return 0, fmt.Errorf("want messages per second, minute or hour: e.g. 200/s, 600/m")
	}
	return n / per, nil
}
