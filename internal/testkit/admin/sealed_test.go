package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestSealedPayloadShown: GET /api/v1/messages/{id} answers "sealed, key
// K" for a sealed payload, never its plain text, unless the token has
// the read-payloads permission and the server holds the key.
func TestSealedPayloadShown(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	keys := relaytest.KeyFile(t)
	id := relaytest.Produce(t, db, &outbox.Config{Seal: &outbox.SealConfig{Keys: keys, Headers: []string{"x-email"}}},
		outbox.Message{Topic: "user.created", Payload: []byte(`{"email":"erin@example.com"}`), Headers: map[string]string{"x-email": "erin@example.com"}})[0]
	const readerToken = "reader-token-51c0f2"
	tokens := []admin.Token{{Name: "ops", Secret: opsToken}, {Name: "reader", Secret: readerToken, Permissions: []string{admin.PermReadPayloads}}}
	withKeys := newAdmin(t, db, &admin.Config{Tokens: tokens, Keys: keys})
	noKeys := newAdmin(t, db, &admin.Config{Tokens: tokens})

	for _, c := range []struct {
		name   string
		srv    string
		token  string
		opened bool
	}{
		{"no permission", "keys", opsToken, false},
		{"permission, no keys", "none", readerToken, false},
		{"permission and keys", "keys", readerToken, true},
	} {
		ts := withKeys
		if c.srv == "none" {
			ts = noKeys
		}
		a := call(t, ts, http.MethodGet, "/api/v1/messages/"+id, c.token, nil)
		a.want(t, http.StatusOK)
		var m struct {
			Payload        string `json:"payload"`
			PayloadPreview string `json:"payload_preview"`
			Sealed         struct {
				KeyID   string            `json:"key_id"`
				Opened  bool              `json:"opened"`
				Headers map[string]string `json:"headers"`
			} `json:"sealed"`
		}
		a.decode(t, &m)
		if c.opened {
			if m.Payload != `{"email":"erin@example.com"}` || !m.Sealed.Opened || m.Sealed.Headers["x-email"] != "erin@example.com" {
				t.Errorf("%s: %s", c.name, a.body)
			}
			continue
		}
		if strings.Contains(a.body, "erin") || m.Payload != "sealed, key k1" || m.PayloadPreview != "sealed, key k1" || m.Sealed.KeyID != "k1" || m.Sealed.Opened {
			t.Errorf("%s: %s", c.name, a.body)
		}
	}
	// Lists never show the plain text either: they say what it is.
	a := call(t, withKeys, http.MethodGet, "/api/v1/messages?limit=10", readerToken, nil)
	a.want(t, http.StatusOK)
	var list struct {
		Messages []struct {
			PayloadPreview string `json:"payload_preview"`
		} `json:"messages"`
	}
	a.decode(t, &list)
	if strings.Contains(a.body, "erin") || len(list.Messages) != 1 || list.Messages[0].PayloadPreview != "sealed, key k1" {
		t.Errorf("list: %s", a.body)
	}
}
