package outboxwebhook

import (
	"net/http"
	"time"

	"github.com/txoutbox/outbox/webhooksig"
)

// The signature scheme is package webhooksig's; these names stay for the
// receivers written against this package.

// DefaultTolerance is webhooksig.DefaultTolerance.
//
// Deprecated: use webhooksig.DefaultTolerance.
const DefaultTolerance = webhooksig.DefaultTolerance

// Errors returned by Verify: webhooksig's.
//
// Deprecated: use the webhooksig errors.
var (
	ErrMissingHeaders      = webhooksig.ErrMissingHeaders
	ErrInvalidTimestamp    = webhooksig.ErrInvalidTimestamp
	ErrTimestampOutOfRange = webhooksig.ErrTimestampOutOfRange
	ErrInvalidSignature    = webhooksig.ErrInvalidSignature
	ErrInvalidSecret       = webhooksig.ErrInvalidSecret
)

// CheckSecret returns ErrInvalidSecret unless secret can sign and verify
// (see webhooksig.ParseSecret).
//
// Deprecated: use webhooksig.ParseSecret.
func CheckSecret(secret string) error {
	if _, err := webhooksig.ParseSecret(secret); err != nil {
		return ErrInvalidSecret
	}
	return nil
}

// Verify is webhooksig.Verify.
//
// Deprecated: use webhooksig.Verify.
func Verify(secret string, header http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	return webhooksig.Verify(secret, header, body, tolerance, now)
}
