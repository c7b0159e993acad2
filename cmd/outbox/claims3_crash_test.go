package main_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/claimchecktest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestRelayClaimCheckS3Crash: 5 MiB payloads kept in an S3 bucket (the
// local S3 server: scripts/services.sh fauxqs) reach a webhook whole,
// checked by SHA-256, through `outbox relay --claim-check s3://…`
// processes killed with SIGKILL twice while a delivery is in flight: each
// is delivered at least once with its bytes, the ones in flight again,
// none goes dead. Then retention removes the delivered rows and the
// orphan sweep their objects: a listing of the bucket finds only the
// object of a message still pending.
func TestRelayClaimCheckS3Crash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the outbox command: -short")
	}
	const (
		mib = 1 << 20
		// Four payloads of 5 MiB: each goes up to and back from the
		// local server, which keeps them in memory; four leave a message
		// for the relay after each of the two kills.
		messages = 4
		kills    = 2
	)
	b, ref := s3Bucket(t, "outbox-crash-", "blobs/")
	db := testdb.New(t, store.Postgres)
	cfg := &outbox.Config{ClaimCheck: &outbox.ClaimCheckConfig{Store: b.Store, Threshold: 64 << 10}}
	crash := claimchecktest.NewCrash(t, db, ref)
	// Hold the relay's second delivery, one message at a time.
	crash.Kills, crash.Hold, crash.BatchSize = kills, 2, 1
	for i := range messages {
		payload := claimchecktest.RandomPayload(uint64(i+1), 5*mib)
		ids := claimchecktest.Produce(t, db, cfg, outbox.Message{Topic: "claim.crash", Key: "k" + strconv.Itoa(i), ContentType: "application/octet-stream", Payload: payload})
		crash.Hook.Expect(ids[0], payload)
	}
	later := claimchecktest.Produce(t, db, cfg, outbox.Message{Topic: "claim.later", ContentType: "application/octet-stream",
		Payload: claimchecktest.RandomPayload(100, 200<<10), NotBefore: time.Now().Add(time.Hour)})
	laterKey := b.Prefix + claimchecktest.Ref(t, db, later[0]).Key
	if n := len(b.Objects(t)); n != messages+1 {
		t.Fatalf("%d objects after enqueue, want %d", n, messages+1)
	}

	crash.Run(t)
	if n := len(b.Objects(t)); n != messages+1 {
		t.Fatalf("%d objects after the deliveries, want %d", n, messages+1)
	}

	crash.Retain(t)
	n, err := outbox.SweepClaimChecks(context.Background(), db.Std, b.Store, time.Millisecond)
	if err != nil || n != messages {
		t.Errorf("the sweep removed %d objects, want %d: %v", n, messages, err)
	}
	if keys := b.Objects(t); len(keys) != 1 || keys[0] != laterKey {
		t.Errorf("objects left %v, want only the pending message's %s", keys, laterKey)
	}
}
