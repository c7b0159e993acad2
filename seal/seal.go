package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// randRead fills b with random bytes.
var randRead = rand.Read

// Header names of a sealed message. They are in the row's headers column
// and, on a route that passes sealed payloads on, on the wire.
const (
	// HeaderAlgorithm names the AEAD that sealed the payload (an
	// Algorithm). Its presence marks a payload as sealed.
	HeaderAlgorithm = "outbox-seal"
	// HeaderKeyID is the id of the key that sealed the payload.
	HeaderKeyID = "outbox-seal-key"
	// HeaderSealedHeaders holds the headers sealed with the payload
	// (SealHeaders), when the producer sealed any.
	HeaderSealedHeaders = "outbox-seal-headers"
)

// headersAAD is appended to the message id to make the associated data
// of sealed headers, so that they cannot pass for the payload.
const headersAAD = ":headers"

// Algorithm names an AEAD, as HeaderAlgorithm writes it.
type Algorithm string

// The algorithms a payload may be sealed with.
const (
	// AES256GCM is AES-256 in Galois/Counter Mode: 12-byte random nonce,
	// 16-byte tag. The default.
	AES256GCM Algorithm = "aes-256-gcm"
	// XChaCha20Poly1305 is XChaCha20-Poly1305: 24-byte random nonce,
	// 16-byte tag.
	XChaCha20Poly1305 Algorithm = "xchacha20-poly1305"
)

// KeySize is the length of every key in bytes.
const KeySize = 32

// Overhead is the most a sealed payload adds to its plaintext before
// the base64 encoding: the longest nonce and the tag.
const Overhead = chacha20poly1305.NonceSizeX + 16

// MaxKeyIDLen is the longest key id.
const MaxKeyIDLen = 255

// Errors. They are wrapped with the details; test with errors.Is.
var (
	// ErrUnknownKey: the provider has no key of that id.
	ErrUnknownKey = errors.New("unknown key")
	// ErrErased: the key existed and was erased on purpose; every payload
	// sealed under it is unreadable for good.
	ErrErased = errors.New("key erased")
	// ErrUnknownAlgorithm: the algorithm is none of this package's.
	ErrUnknownAlgorithm = errors.New("unknown algorithm")
	// ErrMalformed: the sealed text is not base64, or too short to hold
	// a nonce and a tag.
	ErrMalformed = errors.New("malformed sealed payload")
	// ErrAuthentication: the ciphertext, its nonce or the message id it
	// is bound to was changed, or the key is not the one that sealed it.
	ErrAuthentication = errors.New("message authentication failed")
	// ErrInvalidKey: a key is not KeySize bytes or its id is not a valid
	// key id.
	ErrInvalidKey = errors.New("invalid key")
)

// Key is one data key: its id, which travels in HeaderKeyID, and its
// KeySize bytes of material, which never leave the process that holds it.
type Key struct {
	ID     string
	Secret []byte
}

// String shows the key's id only, so that a key printed or logged by
// mistake does not leak its material.
func (k Key) String() string { return "seal.Key(" + k.ID + ")" }

// GoString is String, for %#v.
func (k Key) GoString() string { return k.String() }

// ValidKeyID reports whether id can name a key: 1 to MaxKeyIDLen bytes of
// printable ASCII without spaces (a header value on every broker).
func ValidKeyID(id string) bool {
	if id == "" || len(id) > MaxKeyIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return false
		}
	}
	return true
}

func (k Key) check() error {
	if !ValidKeyID(k.ID) {
		return fmt.Errorf("%w: bad id %q", ErrInvalidKey, k.ID)
	}
	if len(k.Secret) != KeySize {
		return fmt.Errorf("%w: key %s is %d bytes, want %d", ErrInvalidKey, k.ID, len(k.Secret), KeySize)
	}
	return nil
}

// aead returns the cipher of alg under secret.
func (a Algorithm) aead(secret []byte) (cipher.AEAD, error) {
	switch a {
	case AES256GCM:
		b, err := aes.NewCipher(secret)
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(b)
	case XChaCha20Poly1305:
		return chacha20poly1305.NewX(secret)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownAlgorithm, string(a))
}

// Valid reports whether a is one of this package's algorithms.
func (a Algorithm) Valid() bool { return a == AES256GCM || a == XChaCha20Poly1305 }

// Seal encrypts plaintext under key with alg, bound to messageID, and
// returns the sealed payload text: standard base64 (with padding) of
// nonce || ciphertext || tag, the associated data being the bytes of
// messageID. The nonce is random.
func Seal(alg Algorithm, key Key, messageID string, plaintext []byte) (string, error) {
	if err := key.check(); err != nil {
		return "", err
	}
	c, err := alg.aead(key.Secret)
	if err != nil {
		return "", err
	}
	buf := make([]byte, c.NonceSize(), c.NonceSize()+len(plaintext)+c.Overhead())
	if _, err := randRead(buf); err != nil {
		return "", err
	}
	buf = c.Seal(buf, buf, plaintext, []byte(messageID))
	return base64.StdEncoding.EncodeToString(buf), nil
}

// Open decrypts a payload text made by Seal for messageID under key. Its
// errors wrap ErrUnknownAlgorithm, ErrMalformed, ErrAuthentication or
// ErrInvalidKey.
func Open(alg Algorithm, key Key, messageID string, sealed []byte) ([]byte, error) {
	if err := key.check(); err != nil {
		return nil, err
	}
	c, err := alg.aead(key.Secret)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(sealed)))
	n, err := base64.StdEncoding.Decode(raw, sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64", ErrMalformed)
	}
	raw = raw[:n]
	if len(raw) < c.NonceSize()+c.Overhead() {
		return nil, fmt.Errorf("%w: %d bytes, shorter than a nonce and a tag", ErrMalformed, len(raw))
	}
	nonce, ct := raw[:c.NonceSize()], raw[c.NonceSize():]
	plain, err := c.Open(ct[:0], nonce, ct, []byte(messageID))
	if err != nil {
		return nil, ErrAuthentication
	}
	return plain, nil
}

// SealHeaders seals a set of headers of the message messageID, as the
// value of HeaderSealedHeaders: Seal of their JSON object, with
// messageID + ":headers" as the associated data.
func SealHeaders(alg Algorithm, key Key, messageID string, headers map[string]string) (string, error) {
	b, err := json.Marshal(headers)
	if err != nil {
		return "", err
	}
	return Seal(alg, key, messageID+headersAAD, b)
}

// OpenHeaders opens a HeaderSealedHeaders value made by SealHeaders. Its
// errors are Open's, and ErrMalformed when the plain text is not a JSON
// object of strings.
func OpenHeaders(alg Algorithm, key Key, messageID, sealed string) (map[string]string, error) {
	b, err := Open(alg, key, messageID+headersAAD, []byte(sealed))
	if err != nil {
		return nil, err
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%w: sealed headers are not a JSON object of strings", ErrMalformed)
	}
	return h, nil
}

// Sealed reports whether headers mark a sealed payload, and returns its
// algorithm and key id. Header names are matched in lower case, as the
// producer stores them and brokers may change their case.
func Sealed(headers map[string]string) (alg Algorithm, keyID string, ok bool) {
	a, ok := headers[HeaderAlgorithm]
	if !ok {
		for k, v := range headers {
			if strings.EqualFold(k, HeaderAlgorithm) {
				a, ok = v, true
			}
		}
		if !ok {
			return "", "", false
		}
	}
	keyID, found := headers[HeaderKeyID]
	if !found {
		for k, v := range headers {
			if strings.EqualFold(k, HeaderKeyID) {
				keyID = v
			}
		}
	}
	return Algorithm(a), keyID, true
}

// Describe is how tools show a sealed payload they do not open:
// "sealed, key K".
func Describe(keyID string) string { return "sealed, key " + keyID }
