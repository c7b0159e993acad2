package relaytest_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/claimchecktest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestClaimCheckCrash: 5 MiB payloads kept in a directory store reach a
// webhook whole (checked by SHA-256) through `outbox relay --claim-check
// DIR` processes killed with SIGKILL three times while a delivery is in
// flight: every message is delivered at least once with its bytes, the
// ones in flight at a kill again, none goes dead and no blob goes
// missing. Then retention removes the delivered rows and the orphan
// sweep their blobs and the blob of a rolled-back transaction, keeping
// the blob of a message still pending.
func TestClaimCheckCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash end-to-end test: -short")
	}
	relaytest.KeepBinary(t)
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			testClaimCheckCrash(t, d)
		})
	}
}

func testClaimCheckCrash(t *testing.T, d store.Dialect) {
	const (
		mib = 1 << 20
		// Twelve payloads of 5 MiB: 60 MiB of blobs for each database
		// (the databases run side by side), enough for three kills with the relay
		// several deliveries into a run and messages still left for the
		// relay after the last kill, few enough to stay within seconds of
		// writing, hashing and sending on a shared machine.
		messages = 12
		kills    = 3
	)
	db := testdb.New(t, d)
	dir, err := claimcheck.OpenDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &outbox.Config{ClaimCheck: &outbox.ClaimCheckConfig{Store: dir, Threshold: 64 << 10}}

	crash := claimchecktest.NewCrash(t, db, dir.Path())
	crash.Kills = kills
	var ids []string
	for i := 0; i < messages; i += 3 {
		var msgs []outbox.Message
		for j := i; j < i+3; j++ {
			msgs = append(msgs, outbox.Message{Topic: "crash.blob", Key: "k" + strconv.Itoa(j),
				ContentType: "application/octet-stream", Payload: claimchecktest.RandomPayload(uint64(j+1), 5*mib)})
		}
		got := produce(t, db, cfg, msgs...)
		for j, id := range got {
			crash.Hook.Expect(id, msgs[j].Payload)
		}
		ids = append(ids, got...)
	}
	// A transaction that rolls back after Enqueue wrote its blob, and a
	// message due in an hour: its row stays pending, its blob must stay.
	if _, err := enqueueTx(t, db, cfg, false, outbox.Message{Topic: "crash.blob", ContentType: "application/octet-stream", Payload: claimchecktest.RandomPayload(100, 200<<10)}); err != nil {
		t.Fatal(err)
	}
	later := produce(t, db, cfg, outbox.Message{Topic: "crash.later", ContentType: "application/octet-stream", Payload: claimchecktest.RandomPayload(101, 200<<10), NotBefore: time.Now().Add(time.Hour)})
	laterRef := claimchecktest.Ref(t, db, later[0])
	for _, id := range ids {
		if p, h := rowOf(t, db, id); p != "" || h[claimcheck.HeaderRef] == "" {
			t.Fatalf("message %s: a payload column of %d bytes, headers %v", id, len(p), h)
		}
	}
	if n := len(blobFiles(t, dir)); n != messages+2 {
		t.Fatalf("%d blobs after enqueue, want %d", n, messages+2)
	}

	crash.Run(t)
	if st, _, _ := lastError(t, db, later[0]); st != "pending" {
		t.Errorf("the message due in an hour is %s", st)
	}
	if n := len(blobFiles(t, dir)); n != messages+2 {
		t.Fatalf("%d blobs after the deliveries, want %d: the relays removed or wrote some", n, messages+2)
	}

	// Retention with a tiny age removes the delivered rows; the relay
	// keeps blobs for its default grace of an hour, so the sweep runs here
	// with a short one.
	crash.Retain(t)
	if st, _, _ := lastError(t, db, later[0]); st != "pending" {
		t.Fatalf("the message due in an hour is %s after retention", st)
	}
	if n := sweep(t, db, dir, time.Millisecond); n != messages+1 {
		t.Errorf("the sweep removed %d blobs, want %d (the delivered rows' and the rolled-back one)", n, messages+1)
	}
	if files := blobFiles(t, dir); len(files) != 1 || files[0] != laterRef.Key {
		t.Errorf("blobs left %v, want only the pending message's %s", files, laterRef.Key)
	}
	if b, err := claimcheck.Fetch(context.Background(), dir, laterRef); err != nil || len(b) != 200<<10 {
		t.Errorf("the pending message's blob: %d bytes, %v", len(b), err)
	}
}
