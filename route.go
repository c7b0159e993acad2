package outbox

import (
	"time"

	"github.com/txoutbox/outbox/internal/relay"
)

// Route sends the messages whose topic matches Pattern to Publisher.
//
// A route is up or down. It is down while its destination fails every
// delivery, new messages included: the relay then sends it nothing but a
// probe now and then (one message, not charged an attempt), charges no
// attempt to the messages it holds back, and resumes when a probe goes
// through, ramping up from one message in flight (slow start). A failure
// only some messages meet is theirs and is charged as usual. A failure
// that asks for a wait (RetryAfter: HTTP 429 or 503 with Retry-After)
// holds the whole route for that long, charging nothing; when the hold
// ends the route gets one message, and ramps up again only once that one
// is answered without another wait. The exact rule is in docs/design.md
// ("Route health").
//
// Patterns are dot-separated like topics: "*" in a segment matches exactly
// one segment, ">" as the last segment matches one or more, and "*" alone
// matches every topic. The first matching route wins.
type Route struct {
	// Pattern selects topics, e.g. "order.*", "billing.>", "*".
	Pattern string
	// Publisher delivers the messages.
	Publisher Publisher
	// Destination overrides the destination name. Defaults to the topic.
	Destination string
	// Name labels the route in logs and metrics. Defaults to Pattern.
	Name string
	// Retry overrides RelayConfig.Retry for this route.
	Retry *RetryPolicy
	// Checker answers "was this message delivered?" before an uncertain
	// message is sent again. Defaults to the Publisher when it implements
	// Checker.
	Checker Checker
	// MaxInFlight is the most messages of this route being published at
	// once, across all workers of the relay. Defaults to 0: no limit.
	MaxInFlight int
	// Rate is the most messages per second the relay publishes on this
	// route (a token bucket holding a tenth of a second's worth), across
	// all its workers. Defaults to 0: no limit.
	Rate float64
	// ProbeMin is the wait before the first probe of a route that is
	// down; it doubles after every failed probe up to ProbeMax. Defaults
	// to DefaultProbeMin (1 s) and DefaultProbeMax (30 s).
	ProbeMin, ProbeMax time.Duration
	// MaxRetryAfter bounds the wait a failure may ask for (RetryAfter, an
	// HTTP Retry-After): a longer one holds the route this long, so that
	// a hostile or mistaken value cannot park it for a year. Defaults to
	// DefaultMaxRetryAfter (1 h).
	MaxRetryAfter time.Duration
	// MaxRetryAge bounds the retrying of this route's messages by age,
	// overriding RelayConfig.MaxRetryAge (see there). Defaults to 0:
	// RelayConfig.MaxRetryAge.
	MaxRetryAge time.Duration
	// MaxAge expires this route's messages that are older than this
	// (since their enqueue, by the database's clock) when the relay would
	// publish them: they are not sent, they become expired as with
	// Message.ExpiresAt, and the later messages of their key go on. For
	// messages useless when late, whichever producer wrote them.
	// Overrides RelayConfig.MaxAge. Defaults to 0: RelayConfig.MaxAge.
	MaxAge time.Duration
	// Sealed is what the route does with a payload sealed at enqueue
	// (package seal): SealedOpen opens it with RelayConfig.Keys and
	// publishes the plain payload (the table is protected, the broker
	// sees plain text); SealedPass publishes it sealed, with its
	// algorithm and key id headers, for consumers to open (end to end).
	// SealedOpen needs RelayConfig.Keys. Defaults to "": open, and a
	// sealed message is dead "cannot open sealed payload" when the relay
	// has no keys.
	Sealed string
	// ClaimCheck is what the route does with a payload kept in a blob
	// store at enqueue (ClaimCheckConfig, package claimcheck):
	// ClaimInline fetches it from RelayConfig.ClaimCheck and publishes
	// the payload (a blob that is missing or not the one referenced makes
	// the message dead "claim check: …", never sent without its payload;
	// a store that does not answer delays it, uncharged);
	// ClaimReference publishes the reference headers
	// (claimcheck.HeaderRef, HeaderSize, HeaderSHA256) and an empty
	// payload, for consumers to fetch it (inbox.Message.Resolve); the
	// seal headers of a sealed blob then travel too, whatever Sealed
	// says. ClaimInline needs RelayConfig.ClaimCheck. Defaults to "":
	// inline, and a claim-checked message is dead when the relay has no
	// store.
	ClaimCheck string
}

// Route modes of a sealed payload (Route.Sealed).
const (
	SealedOpen = relay.SealedOpen
	SealedPass = relay.SealedPass
)

// Route modes of a claim-checked payload (Route.ClaimCheck).
const (
	ClaimInline    = relay.ClaimInline
	ClaimReference = relay.ClaimReference
)

// Route health defaults: the probe interval of a route that is down.
const (
	// DefaultProbeMin is 1 s.
	DefaultProbeMin = relay.DefaultProbeMin
	// DefaultProbeMax is 30 s.
	DefaultProbeMax = relay.DefaultProbeMax
)

// DefaultMaxRetryAfter is the longest a failure asking for a wait holds a
// route unless Route.MaxRetryAfter says otherwise (1 h).
const DefaultMaxRetryAfter = relay.DefaultMaxRetryAfter

// ValidatePattern reports whether p is a well-formed route pattern.
func ValidatePattern(p string) error { return relay.ValidatePattern(p) }

// MatchTopic reports whether topic matches pattern (see Route).
func MatchTopic(pattern, topic string) bool { return relay.MatchTopic(pattern, topic) }
