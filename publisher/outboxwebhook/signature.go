package outboxwebhook

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

// DefaultTolerance is how far a webhook-timestamp may be from the
// receiver's clock when Verify is given no tolerance: five minutes, as the
// Standard Webhooks scheme recommends.
const DefaultTolerance = 5 * time.Minute

// Errors returned by Verify.
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

// CheckSecret reports whether secret can sign and verify: non-empty, and
// valid base64 after a "whsec_" prefix. It returns ErrInvalidSecret if not.
func CheckSecret(secret string) error {
	if key, err := secretKey(secret); err != nil || key == nil {
		return ErrInvalidSecret
	}
	return nil
}

// secretKey turns a configured secret into the HMAC key; "" gives nil.
func secretKey(secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) == 0 {
		return nil, errors.New("a " + SecretPrefix + " secret must be followed by base64")
	}
	return key, nil
}

// sign returns the base64 HMAC-SHA256 of "id.timestamp.body".
func sign(key []byte, id, ts string, body []byte) string {
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
// tolerance is 0) and a webhook-signature list holding a v1 signature of
// "id.timestamp.body" under secret. secret is read as Config.Secret is.
// Receivers should then dedupe on webhook-id.
func Verify(secret string, header http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	key, err := secretKey(secret)
	if err != nil || key == nil {
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
	want := []byte(sign(key, id, ts, body))
	for _, s := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(s, ",")
		if ok && version == "v1" && hmac.Equal([]byte(sig), want) {
			return nil
		}
	}
	return ErrInvalidSignature
}
