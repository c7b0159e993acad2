package outbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/txoutbox/outbox/internal/msgcheck"
	"github.com/txoutbox/outbox/internal/relay"
)

// Route sends the messages whose topic matches Pattern to Publisher.
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
}

// errBadPattern is wrapped by every pattern validation error.
var errBadPattern = errors.New("invalid route pattern")

// ValidatePattern reports whether p is a well-formed route pattern.
func ValidatePattern(p string) error {
	if p == "*" {
		return nil
	}
	if p == "" {
		return fmt.Errorf("%w: empty", errBadPattern)
	}
	segs := strings.Split(p, ".")
	for i, s := range segs {
		switch {
		case s == "*":
		case s == ">":
			if i != len(segs)-1 {
				return fmt.Errorf("%w %q: '>' must be the last segment", errBadPattern, p)
			}
		case !msgcheck.Topic(s):
			return fmt.Errorf("%w %q: segment %q", errBadPattern, p, s)
		}
	}
	return nil
}

// MatchTopic reports whether topic matches pattern (see Route).
func MatchTopic(pattern, topic string) bool { return relay.MatchTopic(pattern, topic) }
