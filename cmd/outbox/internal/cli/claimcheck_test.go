package cli

import (
	"context"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
)

// TestRelayClaimCheck: --claim-check, else OUTBOX_CLAIM_CHECK_DIR, else
// the config's claim_check opens the relay's blob directory; a claim=inline
// route without one is a usage error naming the flag.
func TestRelayClaimCheck(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "blobs")
	cfg, err := parseConfig("r.yaml", []byte("claim_check: "+dir+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := testEnv(t.Context(), nil, nil, io.Discard, io.Discard)
	inline := &outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "doc.>", ClaimCheck: outbox.ClaimInline}}}

	err = relayClaimCheck(&resolver{e: e, set: map[string]bool{}, cfg: &fileConfig{}}, "", inline)
	if err == nil || !strings.Contains(err.Error(), "route doc.> fetches claim-checked payloads (claim=inline) and the relay has no blob store: give --claim-check DIR") {
		t.Fatalf("no directory: %v", err)
	}
	if err := relayClaimCheck(&resolver{e: e, set: map[string]bool{}, cfg: cfg}, "", inline); err != nil {
		t.Fatal(err)
	}
	if d, ok := inline.ClaimCheck.(*claimcheck.Dir); !ok || d.Path() != dir {
		t.Fatalf("the config's directory: %#v", inline.ClaimCheck)
	}
	flagDir := filepath.Join(t.TempDir(), "flag")
	rc := &outbox.RelayConfig{}
	if err := relayClaimCheck(&resolver{e: e, set: map[string]bool{"claim-check": true}, cfg: cfg}, flagDir, rc); err != nil {
		t.Fatal(err)
	}
	if d, ok := rc.ClaimCheck.(*claimcheck.Dir); !ok || d.Path() != flagDir {
		t.Fatalf("the flag's directory: %#v", rc.ClaimCheck)
	}
	// A URL is opened by the store registered for its scheme (the outbox
	// command registers s3://); an unregistered one is a usage error.
	err = relayClaimCheck(&resolver{e: e, set: map[string]bool{"claim-check": true}, cfg: cfg}, "gs://bucket/blobs", &outbox.RelayConfig{})
	if err == nil || !strings.Contains(err.Error(), `--claim-check: scheme "gs" is not a blob store this program serves`) {
		t.Fatalf("an unregistered scheme: %v", err)
	}
	opened := ""
	RegisterClaimStore("mem", func(_ context.Context, u *url.URL) (claimcheck.Store, error) {
		opened = u.Host + u.Path
		return claimcheck.OpenDir(filepath.Join(t.TempDir(), "mem"))
	})
	rc = &outbox.RelayConfig{}
	if err := relayClaimCheck(&resolver{e: e, set: map[string]bool{"claim-check": true}, cfg: cfg}, "mem://bucket/blobs", rc); err != nil || opened != "bucket/blobs" || rc.ClaimCheck == nil {
		t.Fatalf("a registered scheme: %v, opened %q", err, opened)
	}
}
