package claimcheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a claim-checked message (see the package doc). Their names
// start with "outbox-", so a plain header can never be taken for them.
const (
	// HeaderRef is the reference: SCHEME ":" KEY.
	HeaderRef = "outbox-claim-check"
	// HeaderSize is the blob's length in bytes, decimal.
	HeaderSize = "outbox-claim-check-size"
	// HeaderSHA256 is the blob's SHA-256, lowercase hex.
	HeaderSHA256 = "outbox-claim-check-sha256"
)

// MaxKeyLen is the longest key a Store must take.
const MaxKeyLen = 255

// Errors.
var (
	// ErrNotFound: the store holds no blob under the key.
	ErrNotFound = errors.New("claimcheck: blob not found")
	// ErrInvalidKey: a key that is not 1-255 letters, digits, '-', '_'
	// and '.', starting with a letter or digit (so that no key names a
	// path outside a directory, a hidden file or a temporary file).
	ErrInvalidKey = errors.New("claimcheck: invalid key")
	// ErrMismatch: a blob that is not the one its reference names (its
	// size or SHA-256 differ: truncated, replaced or corrupted).
	ErrMismatch = errors.New("claimcheck: blob does not match its reference")
	// ErrInvalidRef: claim-check headers that are malformed.
	ErrInvalidRef = errors.New("claimcheck: invalid reference")
	// ErrWrongStore: a reference to a blob of another kind of store than
	// the one given (its scheme differs).
	ErrWrongStore = errors.New("claimcheck: reference to another store")
)

// Store keeps blobs by key. Implementations must be safe for concurrent
// use. Put must make the blob durable before it returns (the caller's
// transaction commits a reference to it next) and must not leave a
// partial blob under the key; Get of a key never Put (or Deleted) is
// ErrNotFound.
type Store interface {
	// Scheme names the kind of store in references, e.g. "file", "s3":
	// lowercase letters, digits, '+', '-' and '.', starting with a
	// letter.
	Scheme() string
	// Put stores data under key. Keys name the content (a message id
	// and the data's SHA-256), so a blob already under key holds the same
	// bytes: a store may replace it, or keep it when its size and digest
	// match and fail when they do not (the Cloud Storage store does).
	// Put is safe to retry.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the blob under key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes the blob under key; a key with no blob is no error.
	Delete(ctx context.Context, key string) error
	// List calls fn with the key of every blob last written before
	// olderThan, in no particular order, until fn returns an error (which
	// List returns). Deleting the key in fn is allowed.
	List(ctx context.Context, olderThan time.Time, fn func(key string) error) error
}

// ValidKey reports whether key is a key every Store takes: 1 to
// MaxKeyLen letters, digits, '-', '_' and '.', the first a letter or
// digit, with no "..".
func ValidKey(key string) bool {
	if key == "" || len(key) > MaxKeyLen || strings.Contains(key, "..") {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// CheckKey returns an error wrapping ErrInvalidKey, naming key, when
// ValidKey(key) is false.
func CheckKey(key string) error {
	if ValidKey(key) {
		return nil
	}
	if len(key) > 64 {
		key = key[:64] + "…"
	}
	return fmt.Errorf("%w %q: want 1-%d letters, digits, '-', '_' and '.', starting with a letter or digit", ErrInvalidKey, key, MaxKeyLen)
}

// Key is the key a producer stores the blob of message id under:
// messageID "." the blob's SHA-256 in lowercase hex. The digest makes a
// blob's key its own: a second Enqueue under an id already taken
// (ErrDuplicateMessageID) cannot overwrite the blob of the committed row
// with other bytes.
func Key(messageID string, blob []byte) string {
	sum := sha256.Sum256(blob)
	return messageID + "." + hex.EncodeToString(sum[:])
}

// MessageID is the message id a key made by Key belongs to: the part
// before its first '.'; ok is false for a key of another form.
func MessageID(key string) (id string, ok bool) {
	id, _, ok = strings.Cut(key, ".")
	return id, ok && id != ""
}

// Ref is a parsed reference: which blob, of which kind of store, and
// what it must be.
type Ref struct {
	Scheme string
	Key    string
	Size   int64
	// SHA256 is the blob's digest in lowercase hex.
	SHA256 string
}

// NewRef is the reference to blob, stored under Key(messageID, blob) in
// a store of scheme.
func NewRef(scheme, messageID string, blob []byte) Ref {
	sum := sha256.Sum256(blob)
	digest := hex.EncodeToString(sum[:])
	return Ref{Scheme: scheme, Key: messageID + "." + digest, Size: int64(len(blob)), SHA256: digest}
}

// String is the value of HeaderRef: SCHEME ":" KEY.
func (r Ref) String() string { return r.Scheme + ":" + r.Key }

// SetHeaders records the reference in headers.
func (r Ref) SetHeaders(headers map[string]string) {
	headers[HeaderRef] = r.String()
	headers[HeaderSize] = strconv.FormatInt(r.Size, 10)
	headers[HeaderSHA256] = r.SHA256
}

// ParseHeaders reads the reference in headers: ok is false when they
// hold no HeaderRef; err wraps ErrInvalidRef when they hold a malformed
// one (a bad scheme or key, a missing or bad size or digest).
func ParseHeaders(headers map[string]string) (ref Ref, ok bool, err error) {
	v, ok := headers[HeaderRef]
	if !ok {
		return Ref{}, false, nil
	}
	scheme, key, found := strings.Cut(v, ":")
	switch {
	case !found || !validScheme(scheme):
		return Ref{}, true, fmt.Errorf("%w: %s %s: want SCHEME:KEY", ErrInvalidRef, HeaderRef, quote(v))
	case !ValidKey(key):
		return Ref{}, true, fmt.Errorf("%w: %s %s: bad key", ErrInvalidRef, HeaderRef, quote(v))
	}
	size, err := strconv.ParseInt(headers[HeaderSize], 10, 64)
	if err != nil || size < 0 {
		return Ref{}, true, fmt.Errorf("%w: %s %s: want a byte count", ErrInvalidRef, HeaderSize, quote(headers[HeaderSize]))
	}
	digest := headers[HeaderSHA256]
	if b, err := hex.DecodeString(digest); err != nil || len(b) != sha256.Size || strings.ToLower(digest) != digest {
		return Ref{}, true, fmt.Errorf("%w: %s %s: want 64 lowercase hex digits", ErrInvalidRef, HeaderSHA256, quote(digest))
	}
	return Ref{Scheme: scheme, Key: key, Size: size, SHA256: digest}, true, nil
}

// RemoveHeaders deletes the claim-check headers from headers.
func RemoveHeaders(headers map[string]string) {
	delete(headers, HeaderRef)
	delete(headers, HeaderSize)
	delete(headers, HeaderSHA256)
}

// Check returns an error wrapping ErrMismatch unless blob has the size
// and digest r names.
func (r Ref) Check(blob []byte) error {
	if int64(len(blob)) != r.Size {
		return fmt.Errorf("%w: %s is %d bytes, the reference says %d", ErrMismatch, r, len(blob), r.Size)
	}
	sum := sha256.Sum256(blob)
	if hex.EncodeToString(sum[:]) != r.SHA256 {
		return fmt.Errorf("%w: %s has another SHA-256", ErrMismatch, r)
	}
	return nil
}

// Fetch gets the blob r names from s and checks it: the error wraps
// ErrWrongStore when s is of another scheme, ErrNotFound when the blob is
// gone, ErrMismatch when it is not the one referenced, or is the store's
// own error (a store that does not answer).
func Fetch(ctx context.Context, s Store, r Ref) ([]byte, error) {
	if s.Scheme() != r.Scheme {
		return nil, fmt.Errorf("%w: %s is a %s blob, the store is %s", ErrWrongStore, r, r.Scheme, s.Scheme())
	}
	blob, err := s.Get(ctx, r.Key)
	if err != nil {
		return nil, err
	}
	if err := r.Check(blob); err != nil {
		return nil, err
	}
	return blob, nil
}

// validScheme: a lowercase URI scheme.
func validScheme(s string) bool {
	if s == "" || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// quote renders an untrusted header value for an error: Go-quoted and
// cut to 80 bytes.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80]
	}
	return strconv.Quote(s)
}
