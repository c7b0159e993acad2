package admin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/seal"
)

// claimedMessages enqueues, on PostgreSQL, through a producer that keeps
// payloads over 64 bytes in a directory store and seals topic secret.*:
// a large plain payload, a large sealed one and a small one. It returns
// the store, the key file and the ids in that order.
func claimedMessages(t *testing.T, db *testdb.DB, large, sealed []byte) (*claimcheck.Dir, *seal.FileKeys, []string) {
	t.Helper()
	cfg, dir, keys := relaytest.ClaimCheckSealed(t, "secret.*")
	ids := relaytest.Produce(t, db, cfg,
		outbox.Message{Topic: "document.scanned", Key: "doc-1", Payload: large},
		outbox.Message{Topic: "secret.scanned", Payload: sealed},
		outbox.Message{Topic: "document.small", Payload: []byte(`{"small":true}`)},
	)
	return dir, keys, ids
}

// largeJSON is a JSON document of n bytes or a few more, marked with mark.
func largeJSON(n int, mark string) []byte {
	b := []byte(`{"mark":"` + mark + `","fill":"`)
	for len(b) < n {
		b = append(b, "abcdefghijklmnopqrstuvwxyz"...)
	}
	return append(b, `"}`...)
}

// claimView is the part of a message answer that describes its payload.
type claimView struct {
	Payload        string `json:"payload"`
	PayloadPreview string `json:"payload_preview"`
	ClaimCheck     *struct {
		Ref    string `json:"ref"`
		Size   *int64 `json:"size"`
		SHA256 string `json:"sha256"`
		Error  string `json:"error"`
	} `json:"claim_check"`
	Sealed *struct {
		KeyID  string `json:"key_id"`
		Opened bool   `json:"opened"`
		Reason string `json:"reason"`
	} `json:"sealed"`
	Headers map[string]string `json:"headers"`
}

// TestClaimCheckedPayloadShown: GET /api/v1/messages/{id} describes a
// claim-checked payload, "claim check: file:KEY, N bytes" with a
// claim_check object {ref, size, sha256}, instead of the row's empty
// payload, with the blob store gone (the server never reads it); a sealed
// one says its key too and stays closed even to a token that may read
// payloads; a malformed reference is reported; a small payload is
// unchanged; no answer carries a blob's bytes.
func TestClaimCheckedPayloadShown(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	large, sealed := largeJSON(1000, "LARGE-PLAIN-7c1"), largeJSON(500, "LARGE-SEALED-3e9")
	dir, keys, ids := claimedMessages(t, db, large, sealed)
	// The server must not need the blobs: take them away.
	if err := os.RemoveAll(dir.Path()); err != nil {
		t.Fatal(err)
	}
	const readerToken = "reader-token-claim-1"
	ts := newAdmin(t, db, &admin.Config{Keys: keys, Tokens: []admin.Token{
		{Name: "ops", Secret: opsToken}, {Name: "reader", Secret: readerToken, Permissions: []string{admin.PermReadPayloads}}}})
	get := func(id, token string) (claimView, string) {
		t.Helper()
		a := call(t, ts, http.MethodGet, "/api/v1/messages/"+id, token, nil).want(t, http.StatusOK)
		var v claimView
		a.decode(t, &v)
		if strings.Contains(a.body, "LARGE-") {
			t.Errorf("message %s: the answer carries the blob's bytes: %s", id, a.body)
		}
		return v, a.body
	}

	sum := sha256.Sum256(large)
	digest := hex.EncodeToString(sum[:])
	v, body := get(ids[0], opsToken)
	wantRef := "file:" + ids[0] + "." + digest
	want := fmt.Sprintf("claim check: %s, %d bytes", wantRef, len(large))
	if v.Payload != want || v.PayloadPreview != want || v.ClaimCheck == nil || v.ClaimCheck.Ref != wantRef ||
		v.ClaimCheck.Size == nil || *v.ClaimCheck.Size != int64(len(large)) || v.ClaimCheck.SHA256 != digest || v.ClaimCheck.Error != "" || v.Sealed != nil {
		t.Errorf("claim-checked message: want payload %q and claim_check {ref %s, size %d, sha256 %s}: %s", want, wantRef, len(large), digest, body)
	}
	if v.Headers[claimcheck.HeaderRef] != wantRef {
		t.Errorf("the reference headers are not shown as they are: %v", v.Headers)
	}

	for _, token := range []string{opsToken, readerToken} {
		v, body = get(ids[1], token)
		if v.ClaimCheck == nil || !strings.HasPrefix(v.ClaimCheck.Ref, "file:"+ids[1]+".") || v.Sealed == nil || v.Sealed.Opened ||
			v.Sealed.KeyID != "k1" || !strings.Contains(v.Sealed.Reason, "blob store") ||
			!strings.HasPrefix(v.Payload, "claim check: file:"+ids[1]+".") || !strings.HasSuffix(v.Payload, " bytes (sealed, key k1)") {
			t.Errorf("sealed and claim-checked message, token %.6s…: %s", token, body)
		}
	}

	v, body = get(ids[2], opsToken)
	if v.ClaimCheck != nil || v.Payload != `{"small":true}` {
		t.Errorf("small message: %s", body)
	}

	// The list's previews say the same, newest first.
	a := call(t, ts, http.MethodGet, "/api/v1/messages?limit=10", opsToken, nil).want(t, http.StatusOK)
	var list struct {
		Messages []struct {
			MessageID      string `json:"message_id"`
			PayloadPreview string `json:"payload_preview"`
		} `json:"messages"`
	}
	a.decode(t, &list)
	previews := map[string]string{}
	for _, m := range list.Messages {
		previews[m.MessageID] = m.PayloadPreview
	}
	if previews[ids[0]] != want || !strings.HasSuffix(previews[ids[1]], " bytes (sealed, key k1)") ||
		!strings.HasPrefix(previews[ids[1]], "claim check: file:"+ids[1]+".") || previews[ids[2]] != `{"small":true}` {
		t.Errorf("list previews: %s", a.body)
	}

	// A reference broken by plain SQL is shown with what is wrong.
	db.Exec(t, `UPDATE outbox_messages SET headers = '{"outbox-claim-check":"file:../../etc/passwd","outbox-claim-check-size":"12"}' WHERE message_id = $1`, ids[0])
	v, body = get(ids[0], opsToken)
	if v.ClaimCheck == nil || v.ClaimCheck.Ref != "file:../../etc/passwd" || !strings.Contains(v.ClaimCheck.Error, "invalid reference") ||
		v.ClaimCheck.Size != nil || v.Payload != "claim check: invalid reference" {
		t.Errorf("malformed reference: %s", body)
	}
}
