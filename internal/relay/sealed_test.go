package relay

import (
	"context"
	"errors"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/seal"
)

// flakyKeys is a key provider that cannot answer.
type flakyKeys struct{}

func (flakyKeys) Current(context.Context) (seal.Key, error) {
	return seal.Key{}, errors.New("kms: timeout")
}
func (flakyKeys) Key(context.Context, string) (seal.Key, error) {
	return seal.Key{}, errors.New("kms: timeout")
}

// TestPrepareSealedRows: what prepare makes of sealed rows on each kind
// of route, with and without keys.
func TestPrepareSealedRows(t *testing.T) {
	const id = "0b9d6c1e-3f7a-4b7e-9a51-2d1f3c4e5a6b"
	k, err := seal.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := seal.NewStaticKeys(k)
	if err != nil {
		t.Fatal(err)
	}
	keys.Erase("gone")
	text, err := seal.Seal(seal.AES256GCM, k, id, []byte("\x00binary"))
	if err != nil {
		t.Fatal(err)
	}
	row := func(h string) store.Row {
		return oddRow(func(r *store.Row) { r.MessageID, r.Payload, r.Headers = id, text, h })
	}
	good := `{"content-type":"application/octet-stream","outbox-seal":"aes-256-gcm","outbox-seal-key":"k1"}`
	hidden, err := seal.SealHeaders(seal.AES256GCM, k, id, map[string]string{"x-email": "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	withHeaders := `{"outbox-seal":"aes-256-gcm","outbox-seal-key":"k1","outbox-seal-headers":"` + hidden + `"}`
	reservedHidden, _ := seal.SealHeaders(seal.AES256GCM, k, id, map[string]string{"outbox-topic": "evil"})
	for _, c := range []struct {
		name     string
		mode     string
		keys     seal.KeyProvider
		headers  string
		status   string // "" delivered
		lastErr  string
		charged  bool
		payload  string
		sealHdrs bool
	}{
		{"open", SealedOpen, keys, good, "", "", false, "\x00binary", false},
		{"default mode opens", "", keys, good, "", "", false, "\x00binary", false},
		{"pass", SealedPass, keys, good, "", "", false, text, true},
		{"pass without keys", SealedPass, nil, good, "", "", false, text, true},
		{"default without keys", "", nil, good, store.StatusDead, "cannot open sealed payload: the relay has no keys (outbox relay --keys FILE)", true, "", false},
		{"unknown key", SealedOpen, keys, `{"outbox-seal":"aes-256-gcm","outbox-seal-key":"k9"}`, store.StatusDead, "cannot open sealed payload: unknown key k9", true, "", false},
		{"unknown key passed on", SealedPass, keys, `{"outbox-seal":"aes-256-gcm","outbox-seal-key":"k9"}`, "", "", false, text, true},
		{"erased", SealedOpen, keys, `{"outbox-seal":"aes-256-gcm","outbox-seal-key":"gone"}`, store.StatusDead, "erased: key gone no longer exists", false, "", false},
		{"erased on a passing route", SealedPass, keys, `{"outbox-seal":"aes-256-gcm","outbox-seal-key":"gone"}`, store.StatusDead, "erased: key gone no longer exists", false, "", false},
		{"unknown algorithm", SealedOpen, keys, `{"outbox-seal":"rot13","outbox-seal-key":"k1"}`, store.StatusDead, `cannot open sealed payload: unknown algorithm "rot13"`, true, "", false},
		{"no key id", SealedOpen, keys, `{"outbox-seal":"aes-256-gcm"}`, store.StatusDead, "cannot open sealed payload: no outbox-seal-key header", true, "", false},
		{"key id alone is reserved", SealedOpen, keys, `{"outbox-seal-key":"k1"}`, store.StatusDead, `header "outbox-seal-key" is reserved: names starting with "outbox-" are set by the relay`, true, "", false},
		{"provider down", SealedOpen, flakyKeys{}, good, store.StatusPending, "not counted (the key provider could not answer): kms: timeout", false, "", false},
		{"sealed headers opened", SealedOpen, keys, withHeaders, "", "", false, "\x00binary", false},
		{"sealed headers passed on", SealedPass, keys, withHeaders, "", "", false, text, true},
		{"sealed headers tampered", SealedOpen, keys, `{"outbox-seal":"aes-256-gcm","outbox-seal-key":"k1","outbox-seal-headers":"` + text + `"}`, store.StatusDead,
			"cannot open sealed headers: message authentication failed", true, "", false},
		{"sealed headers reserved", SealedOpen, keys, `{"outbox-seal":"aes-256-gcm","outbox-seal-key":"k1","outbox-seal-headers":"` + reservedHidden + `"}`, store.StatusDead,
			`sealed headers: header "outbox-topic" is reserved: names starting with "outbox-" are set by the relay`, true, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := prepareRelay(t)
			r.cfg.Keys = c.keys
			r.router.lookup("x.y").Sealed = c.mode
			rw := row(c.headers)
			it := r.prepare(&rw)
			if c.status == "" {
				if it.decided {
					t.Fatalf("decided %+v", it.out)
				}
				if string(it.env.Payload) != c.payload {
					t.Errorf("payload %q, want %q", it.env.Payload, c.payload)
				}
				_, has := it.env.Headers[seal.HeaderAlgorithm]
				if has != c.sealHdrs || (has && it.env.Headers[seal.HeaderKeyID] == "") {
					t.Errorf("headers %v", it.env.Headers)
				}
				if c.headers == withHeaders {
					_, passed := it.env.Headers[seal.HeaderSealedHeaders]
					if c.sealHdrs != passed || (!passed && it.env.Headers["x-email"] != "a@example.com") || (passed && it.env.Headers["x-email"] != "") {
						t.Errorf("sealed headers: %v", it.env.Headers)
					}
				}
				return
			}
			if !it.decided || it.out.Status != c.status || it.out.Error != c.lastErr || it.out.CountAttempt != c.charged {
				t.Errorf("outcome %+v, want %s %q charged %v", it.out, c.status, c.lastErr, c.charged)
			}
		})
	}
}
