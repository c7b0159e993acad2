// Package webhooksig is the Standard Webhooks signature scheme the relay's
// webhook publisher signs with and inbox.WebhookHandler verifies: use it
// to check the relay's webhooks in a receiver of your own.
//
// A signed request carries three headers:
//
//	webhook-id: <message id>            the same on every attempt
//	webhook-timestamp: <unix seconds>   fresh on every attempt
//	webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">
//
// The HMAC key comes from a secret: one starting with "whsec_" is the
// Standard Webhooks form, whose rest is base64 and whose decoded bytes are
// the key; any other string is the key as it is. A receiver verifies the
// signature and that the timestamp is recent (against replays), then
// dedupes on webhook-id, since a message may be delivered more than once.
package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the scheme.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix marks a Standard Webhooks secret: the rest is base64 and
// its decoded bytes are the HMAC key.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a webhook-timestamp may be from the
// receiver's clock when Verify is given no tolerance: five minutes, as the
// Standard Webhooks scheme recommends.
const DefaultTolerance = 5 * time.Minute

// Errors returned by Verify and ParseSecret.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or
	// webhook-signature is absent.
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature header")
	// ErrInvalidTimestamp: webhook-timestamp is not a Unix time in seconds.
	ErrInvalidTimestamp = errors.New("webhook: invalid webhook-timestamp")
	// ErrTimestampOutOfRange: webhook-timestamp is further from now than
	// the tolerance, so the request may be a replay.
	ErrTimestampOutOfRange = errors.New("webhook: webhook-timestamp outside the tolerance")
	// ErrInvalidSignature: no v1 signature in webhook-signature matches.
	ErrInvalidSignature = errors.New("webhook: no matching signature")
	// ErrInvalidSecret: the secret is empty, or starts with "whsec_" and
	// the rest is not base64.
	ErrInvalidSecret = errors.New("webhook: invalid secret")
)

// secretError is ErrInvalidSecret with its reason as the message.
type secretError struct{ reason string }

func (e *secretError) Error() string        { return e.reason }
func (e *secretError) Is(target error) bool { return target == ErrInvalidSecret }

// ParseSecret turns a secret into the HMAC key: the base64-decoded rest
// of a "whsec_" secret, or any other string's bytes. An empty secret, or
// a "whsec_" one not followed by base64 of at least one byte, is an error
// that matches ErrInvalidSecret and says why.
func ParseSecret(secret string) ([]byte, error) {
	if secret == "" {
		return nil, &secretError{"the secret is empty"}
	}
	rest, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) == 0 {
		return nil, &secretError{"a " + SecretPrefix + " secret must be followed by base64"}
	}
	return key, nil
}

// Sign returns the webhook-signature value for a message: "v1," and the
// base64 HMAC-SHA256 under key of "id.timestamp.body", where timestamp is
// the webhook-timestamp value (Unix seconds in decimal).
func Sign(key []byte, id, timestamp string, body []byte) string {
	return "v1," + mac(key, id, timestamp, body)
}

// mac is the base64 HMAC-SHA256 of "id.timestamp.body".
func mac(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Verify checks a received webhook: header must carry webhook-id,
// webhook-timestamp within tolerance of now (DefaultTolerance when
// tolerance is 0) and a webhook-signature list (space-separated, over one
// or more header lines) holding a v1 signature of "id.timestamp.body"
// under secret, read as ParseSecret reads it. Signatures of other
// versions are ignored. It returns nil or one of the errors above
// (ErrInvalidSecret for a secret ParseSecret refuses).
func Verify(secret string, header http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	key, err := ParseSecret(secret)
	if err != nil {
		return ErrInvalidSecret
	}
	id, ts := header.Get(HeaderID), header.Get(HeaderTimestamp)
	sigs := strings.Join(header.Values(HeaderSignature), " ")
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrInvalidTimestamp
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	t := time.Unix(sec, 0)
	if t.Before(now.Add(-tolerance)) || t.After(now.Add(tolerance)) {
		return ErrTimestampOutOfRange
	}
	want := []byte(mac(key, id, ts, body))
	for _, s := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(s, ",")
		if ok && version == "v1" && hmac.Equal([]byte(sig), want) {
			return nil
		}
	}
	return ErrInvalidSignature
}
