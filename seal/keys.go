package seal

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// KeyProvider hands out data keys. Implementations are safe for
// concurrent use and never log key material.
type KeyProvider interface {
	// Current returns the key new messages are sealed under.
	Current(ctx context.Context) (Key, error)
	// Key returns the key of id; an error wrapping ErrUnknownKey when it
	// has none, ErrErased when it was erased. Any other error is taken as
	// passing (the provider could not answer now): the relay asks again
	// later.
	Key(ctx context.Context, id string) (Key, error)
}

// SubjectKeyProvider is a KeyProvider that keeps a key per data subject
// (a customer, a tenant), so that erasing it makes every payload of the
// subject unreadable (crypto-shredding).
type SubjectKeyProvider interface {
	KeyProvider
	// SubjectKey returns the key of subject, whose id is subject itself
	// (e.g. "customer:42"), creating it on first use. An erased subject's
	// key is not created again: the error wraps ErrErased.
	SubjectKey(ctx context.Context, subject string) (Key, error)
}

// StaticKeys is a KeyProvider over a fixed set of keys held in memory,
// for tests and for keys handed over by the environment (KeysFromEnv).
type StaticKeys struct {
	mu      sync.RWMutex
	current string
	keys    map[string]Key
	erased  map[string]bool
}

// NewStaticKeys returns a provider holding keys, the first being the
// current one.
func NewStaticKeys(keys ...Key) (*StaticKeys, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrInvalidKey)
	}
	s := &StaticKeys{current: keys[0].ID, keys: map[string]Key{}, erased: map[string]bool{}}
	for _, k := range keys {
		if err := k.check(); err != nil {
			return nil, err
		}
		if _, dup := s.keys[k.ID]; dup {
			return nil, fmt.Errorf("%w: key %s given twice", ErrInvalidKey, k.ID)
		}
		s.keys[k.ID] = Key{ID: k.ID, Secret: append([]byte(nil), k.Secret...)}
	}
	return s, nil
}

// Current returns the current key.
func (s *StaticKeys) Current(context.Context) (Key, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[s.current]
	if !ok {
		return Key{}, fmt.Errorf("%w: the current key %s", ErrErased, s.current)
	}
	return k, nil
}

// Key returns the key of id.
func (s *StaticKeys) Key(_ context.Context, id string) (Key, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if k, ok := s.keys[id]; ok {
		return k, nil
	}
	if s.erased[id] {
		return Key{}, fmt.Errorf("%w: key %s no longer exists", ErrErased, id)
	}
	return Key{}, fmt.Errorf("%w %s", ErrUnknownKey, id)
}

// Add adds k; with current it becomes the current key (a rotation).
func (s *StaticKeys) Add(k Key, current bool) error {
	if err := k.check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[k.ID] = Key{ID: k.ID, Secret: append([]byte(nil), k.Secret...)}
	delete(s.erased, k.ID)
	if current {
		s.current = k.ID
	}
	return nil
}

// Erase forgets the key of id: what it sealed can no longer be opened.
func (s *StaticKeys) Erase(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.keys, id)
	s.erased[id] = true
}

// EnvKeys is the environment variable KeysFromEnv reads by default.
const EnvKeys = "OUTBOX_KEYS"

// KeysFromEnv reads keys from the environment variable name (EnvKeys when
// empty): "ID=BASE64[,ID=BASE64…]", each BASE64 the standard base64 of
// KeySize bytes, the first key being the current one. Errors never quote
// the material.
func KeysFromEnv(name string) (*StaticKeys, error) {
	if name == "" {
		name = EnvKeys
	}
	v := os.Getenv(name)
	if v == "" {
		return nil, fmt.Errorf("%w: %s is not set", ErrInvalidKey, name)
	}
	var keys []Key
	for i, part := range strings.Split(v, ",") {
		id, b64, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%w: %s: entry %d is not ID=BASE64", ErrInvalidKey, name, i+1)
		}
		secret, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: key %s is not standard base64", ErrInvalidKey, name, id)
		}
		keys = append(keys, Key{ID: id, Secret: secret})
	}
	return NewStaticKeys(keys...)
}

// OpenPayload opens a payload whose headers mark it sealed, fetching its
// key from keys; a payload not sealed comes back as it is. It is what a
// consumer of a route that passes sealed payloads on calls on each
// message (inbox.Message.Open does it for a decoded message, sealed
// headers included).
func OpenPayload(ctx context.Context, keys KeyProvider, messageID string, headers map[string]string, payload []byte) ([]byte, error) {
	plain, _, err := OpenMessage(ctx, keys, messageID, headers, payload)
	return plain, err
}

// OpenMessage is OpenPayload that also opens the headers sealed with the
// payload (HeaderSealedHeaders), returned apart: nil when there are none.
func OpenMessage(ctx context.Context, keys KeyProvider, messageID string, headers map[string]string, payload []byte) ([]byte, map[string]string, error) {
	alg, keyID, ok := Sealed(headers)
	if !ok {
		return payload, nil, nil
	}
	if !alg.Valid() {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownAlgorithm, string(alg))
	}
	if keys == nil {
		return nil, nil, errors.New("seal: the payload is sealed and no KeyProvider was given")
	}
	key, err := keys.Key(ctx, keyID)
	if err != nil {
		return nil, nil, err
	}
	plain, err := Open(alg, key, messageID, payload)
	if err != nil {
		return nil, nil, err
	}
	sealed := headers[HeaderSealedHeaders]
	for k, v := range headers {
		if sealed == "" && strings.EqualFold(k, HeaderSealedHeaders) {
			sealed = v
		}
	}
	if sealed == "" {
		return plain, nil, nil
	}
	h, err := OpenHeaders(alg, key, messageID, sealed)
	if err != nil {
		return nil, nil, fmt.Errorf("headers: %w", err)
	}
	return plain, h, nil
}

// NewKey returns a fresh random key named id.
func NewKey(id string) (Key, error) {
	if !ValidKeyID(id) {
		return Key{}, fmt.Errorf("%w: bad id %q", ErrInvalidKey, id)
	}
	k := Key{ID: id, Secret: make([]byte, KeySize)}
	if _, err := randRead(k.Secret); err != nil {
		return Key{}, err
	}
	return k, nil
}
