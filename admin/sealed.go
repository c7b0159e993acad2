package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"

	"github.com/txoutbox/outbox/seal"
)

// PermReadPayloads is the permission that lets a token read the plain
// text of sealed payloads (Token.Permissions).
const PermReadPayloads = "read-payloads"

// sealedJSON describes a sealed payload in the answer for one message.
type sealedJSON struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"key_id"`
	// Opened: payload is the plain text, opened with the server's keys.
	Opened bool `json:"opened"`
	// Encoding is "base64" when the opened payload is binary and shown
	// base64-encoded.
	Encoding string `json:"encoding,omitempty"`
	// Reason says why the payload is not shown, when it is not.
	Reason string `json:"reason,omitempty"`
	// Headers are the headers sealed with the payload, once opened.
	Headers map[string]string `json:"headers,omitempty"`
}

// sealedView replaces a sealed payload in m by "sealed, key K", or by its
// plain text when the token may read payloads and the server holds the
// key. headers is the row's headers column.
func (s *Server) sealedView(ctx context.Context, m *messageJSON, headers, token string) {
	h := map[string]string{}
	if json.Unmarshal([]byte(headers), &h) != nil {
		return
	}
	alg, keyID, ok := seal.Sealed(h)
	if !ok {
		return
	}
	m.Sealed = &sealedJSON{Algorithm: string(alg), KeyID: keyID}
	var stored []byte
	if m.Payload != nil {
		stored = []byte(*m.Payload)
	}
	shown := seal.Describe(keyID)
	m.Payload, m.PayloadPreview = &shown, shown
	switch {
	case !s.readPayloads[token]:
		m.Sealed.Reason = "the token lacks the " + PermReadPayloads + " permission"
		return
	case s.keys == nil:
		m.Sealed.Reason = "the server holds no keys"
		return
	}
	plain, hidden, err := seal.OpenMessage(ctx, s.keys, m.MessageID, h, stored)
	if err != nil {
		m.Sealed.Reason = "cannot open: " + err.Error()
		return
	}
	text := string(plain)
	if !utf8.Valid(plain) {
		text, m.Sealed.Encoding = base64.StdEncoding.EncodeToString(plain), "base64"
	}
	m.Payload, m.PayloadPreview, m.Sealed.Opened = &text, preview(text), true
	m.Sealed.Headers = hidden
}
