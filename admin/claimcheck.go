package admin

import (
	"encoding/json"
	"strconv"

	"github.com/txoutbox/outbox/claimcheck"
)

// claimCheckJSON describes a payload kept in a blob store (package
// claimcheck): the row holds an empty payload and the reference. The
// server never fetches the blob.
type claimCheckJSON struct {
	// Ref is the reference, SCHEME:KEY (as stored when it is malformed).
	Ref string `json:"ref"`
	// Size is the blob's length in bytes and SHA256 its digest in
	// lowercase hex; both absent for a malformed reference.
	Size   *int64 `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Error says what is wrong with a malformed reference (the relay
	// makes such a message dead).
	Error string `json:"error,omitempty"`
}

// rowHeaders is the headers column as a map; nil when it is not a JSON
// object of strings.
func rowHeaders(headers string) map[string]string {
	h := map[string]string{}
	if json.Unmarshal([]byte(headers), &h) != nil {
		return nil
	}
	return h
}

// claimCheckView replaces the empty payload of a claim-checked message in
// m by a description of its blob, "claim check: SCHEME:KEY, N bytes", and
// fills m.ClaimCheck. h is the row's headers.
func claimCheckView(m *messageJSON, h map[string]string) {
	ref, ok, err := claimcheck.ParseHeaders(h)
	if !ok {
		return
	}
	var shown string
	if err != nil {
		m.ClaimCheck = &claimCheckJSON{Ref: h[claimcheck.HeaderRef], Error: err.Error()}
		shown = "claim check: invalid reference"
	} else {
		size := ref.Size
		m.ClaimCheck = &claimCheckJSON{Ref: ref.String(), Size: &size, SHA256: ref.SHA256}
		shown = describeClaim(ref)
	}
	m.Payload, m.PayloadPreview = &shown, shown
}

// describeClaim is how a claim-checked payload is shown in place of the
// payload: "claim check: SCHEME:KEY, N bytes".
func describeClaim(ref claimcheck.Ref) string {
	unit := " bytes"
	if ref.Size == 1 {
		unit = " byte"
	}
	return "claim check: " + ref.String() + ", " + strconv.FormatInt(ref.Size, 10) + unit
}
