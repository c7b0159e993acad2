package relay

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/txoutbox/outbox/publisher"
)

// Publisher delivers envelopes: the part of publisher.Publisher the relay
// calls.
type Publisher interface {
	Publish(ctx context.Context, batch []*publisher.Envelope) []error
}

// Route sends the messages whose topic matches Pattern to Publisher; see
// outbox.Route.
type Route struct {
	Pattern     string
	Publisher   Publisher
	Destination string
	Name        string // "" is Pattern
	Retry       *RetryPolicy
	Checker     publisher.Checker // nil: none
	// Runs: Publisher takes a run of one key's messages in one call and
	// fails the rest of the run after a failure (see outbox.RunPublisher).
	Runs bool
	// MaxInFlight bounds the route's messages being published at once
	// across the relay's workers; 0: no bound.
	MaxInFlight int
	// Rate bounds the route's messages per second (a token bucket); 0:
	// no bound.
	Rate float64
	// ProbeMin and ProbeMax bound the interval between probes of a route
	// that is down; 0: DefaultProbeMin, DefaultProbeMax.
	ProbeMin, ProbeMax time.Duration
	// MaxRetryAfter bounds the wait a failure may ask for (a hold of the
	// route); 0: DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// MaxRetryAge bounds the retrying of the route's messages by age;
	// 0: Config.MaxRetryAge.
	MaxRetryAge time.Duration
	// MaxAge expires the route's messages older than this when they would
	// be published; 0: Config.MaxAge.
	MaxAge time.Duration
	// Sealed is what the route does with a sealed payload: SealedOpen
	// ("" too) or SealedPass.
	Sealed string
	// ClaimCheck is what the route does with a claim-checked payload:
	// ClaimInline ("" too) or ClaimReference.
	ClaimCheck string
}

// TextContentType is the content type of a row written without one whose
// payload is not JSON.
const TextContentType = "text/plain; charset=utf-8"

// classOf returns the class of a publish error and the wait it asks for.
func classOf(err error) (publisher.ErrorClass, time.Duration) {
	return publisher.Classify(err), publisher.RetryAfterOf(err)
}

// oneLine keeps an error fit for last_error and logs: one line of UTF-8
// text without NUL (PostgreSQL refuses both in text), at most 1,000 bytes
// and an ellipsis. Errors may quote what a row or a destination held.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	}
	if len(s) > 1000 {
		cut := 1000
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// unknownErr marks err as an attempt of unknown outcome.
func unknownErr(err error) error { return publisher.Unknown(err) }
