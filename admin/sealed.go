package admin

import (
	"context"
	"encoding/base64"
	"unicode/utf8"

	"github.com/txoutbox/outbox/claimcheck"
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
// key. h is the row's headers. A sealed payload kept in a blob store
// (claimCheckView ran first) stays described as the claim check, with
// its key id: the server does not fetch blobs, so it never opens one.
func (s *Server) sealedView(ctx context.Context, m *messageJSON, h map[string]string, token string) {
	alg, keyID, ok := seal.Sealed(h)
	if !ok {
		return
	}
	m.Sealed = &sealedJSON{Algorithm: string(alg), KeyID: keyID}
	if m.ClaimCheck != nil {
		shown := *m.Payload + " (" + seal.Describe(keyID) + ")"
		m.Payload, m.PayloadPreview = &shown, shown
		m.Sealed.Reason = "the sealed payload is in the blob store, which the admin server does not read"
		return
	}
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

// listView is how a list shows a sealed or claim-checked payload (the
// search returns the headers of those rows only): "sealed, key K" or
// "claim check: SCHEME:KEY, N bytes" as the preview, in place of the
// start of the sealed text or an empty one. A list never opens a payload.
func listView(m *messageJSON, headers string) {
	if headers == "" {
		return
	}
	h := rowHeaders(headers)
	if h == nil {
		return
	}
	shown := ""
	if ref, ok, err := claimcheck.ParseHeaders(h); ok {
		shown = "claim check: invalid reference"
		if err == nil {
			shown = describeClaim(ref)
		}
	}
	if _, keyID, ok := seal.Sealed(h); ok {
		if shown == "" {
			shown = seal.Describe(keyID)
		} else {
			shown += " (" + seal.Describe(keyID) + ")"
		}
	}
	if shown != "" {
		m.PayloadPreview = shown
	}
}
