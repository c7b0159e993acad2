package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestDeadListClaimChecked: 'dead list --json --with-payload' shows a
// dead claim-checked message as "claim check: file:KEY, N bytes" with its
// reference, a sealed one with its key too, never a blob's bytes, and a
// small message's payload as stored.
func TestDeadListClaimChecked(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	cfg, _, _ := relaytest.ClaimCheckSealed(t, "dead.sealed")
	large := []byte(`{"mark":"BLOB-BYTES-91d","fill":"` + strings.Repeat("x", 300) + `"}`)
	ids := relaytest.Produce(t, db, cfg,
		outbox.Message{Topic: "dead.large", Payload: large},
		outbox.Message{Topic: "dead.sealed", Payload: large},
		outbox.Message{Topic: "dead.small", Payload: []byte(`{"small":1}`)},
	)
	for _, topic := range []string{"dead.large", "dead.sealed", "dead.small"} {
		markDead(t, db, topic)
	}

	r := run(t, dbVars(db), "dead", "list", "--json", "--with-payload").ok(t)
	if strings.Contains(r.stdout, "BLOB-BYTES") {
		t.Errorf("dead list prints a blob's bytes:\n%s", r.stdout)
	}
	var list []deadJSON
	r.decode(t, &list)
	got := map[string]deadJSON{}
	for _, d := range list {
		got[d.MessageID] = d
	}
	sum := sha256.Sum256(large)
	digest := hex.EncodeToString(sum[:])
	ref := "file:" + ids[0] + "." + digest
	d := got[ids[0]]
	if want := fmt.Sprintf("claim check: %s, %d bytes", ref, len(large)); d.Payload == nil || *d.Payload != want ||
		d.ClaimCheck == nil || d.ClaimCheck.Ref != ref || d.ClaimCheck.Size == nil || *d.ClaimCheck.Size != int64(len(large)) || d.ClaimCheck.SHA256 != digest {
		t.Errorf("claim-checked: want payload %q and its reference: %+v %+v", want, d, d.ClaimCheck)
	}
	d = got[ids[1]]
	if d.Payload == nil || !strings.HasPrefix(*d.Payload, "claim check: file:"+ids[1]+".") || !strings.HasSuffix(*d.Payload, " bytes (sealed, key k1)") || d.ClaimCheck == nil {
		t.Errorf("sealed and claim-checked: %+v", d)
	}
	d = got[ids[2]]
	if d.Payload == nil || *d.Payload != `{"small":1}` || d.ClaimCheck != nil {
		t.Errorf("small: %+v", d)
	}
}
