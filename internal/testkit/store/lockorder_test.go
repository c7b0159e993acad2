package store_test

import (
	"context"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMySQLSettleLocksLeasesInPartitionOrder: a settle reads its lease
// rows with shared locks, and a renewal writes them in partition order. A
// settle whose outcomes come high partition first used to hold the high
// lease while it waited for a low one a renewal held, which then waited
// for the high one: a deadlock. Settled in partition order, the settle
// waits for the low lease before it takes the high one, and the renewal
// goes through.
func TestMySQLSettleLocksLeasesInPartitionOrder(t *testing.T) {
	db := testdb.New(t, store.MySQL)
	st := db.Store()
	ctx := context.Background()

	// Two keys in different partitions; the high one with many rows, so
	// that the settle has more locks than the renewal and the database
	// picks the renewal as the victim of a deadlock.
	keyPart := map[int]string{}
	for i := 0; len(keyPart) < 2; i++ {
		k := "key-" + string(rune('a'+i))
		insert(t, db, st, newMsg("t.order", k))
		rows, err := st.Read(ctx, allParts(t, st), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			keyPart[r.Partition] = r.Key
		}
	}
	lo, hi := -1, -1
	for p := range keyPart {
		if lo < 0 || p < lo {
			lo = p
		}
		if p > hi {
			hi = p
		}
	}
	lowKey, highKey := keyPart[lo], keyPart[hi]
	for range 30 {
		insert(t, db, st, newMsg("t.order", highKey))
	}
	parts := acquireAll(t, st, "relay")
	rows, err := st.Read(ctx, parts, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var outs, low []store.Outcome
	for _, r := range rows {
		o := store.Outcome{ID: r.ID, Status: store.StatusSent, CountAttempt: true, Partition: r.Partition}
		switch r.Key {
		case highKey:
			outs = append(outs, o)
		case lowKey:
			low = append(low, o)
		}
	}
	outs = append(outs, low...) // high partition first
	if len(outs) != len(rows) || len(low) == 0 {
		t.Fatalf("read %d rows, %d of them in partitions %d and %d", len(rows), len(outs), lo, hi)
	}

	// The renewal, one lease at a time: it holds the low lease while the
	// settle runs.
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	const renew = "UPDATE outbox_leases SET expires_at = NOW(6) + INTERVAL 1 MINUTE WHERE partition_no = ? AND owner = 'relay'"
	if _, err := tx.ExecContext(ctx, renew, lo); err != nil {
		t.Fatal(err)
	}

	type result struct {
		n   int64
		err error
	}
	settled := make(chan result, 1)
	go func() {
		n, err := st.Settle(ctx, "relay", outs)
		settled <- result{n, err}
	}()

	waitForLockWait(t, db) // for the low lease
	if _, err := tx.ExecContext(ctx, renew, hi); err != nil {
		t.Fatalf("renewal of the high lease while a settle runs: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-settled
	if r.err != nil || r.n != int64(len(outs)) {
		t.Fatalf("settled %d of %d: %v", r.n, len(outs), r.err)
	}
	if c := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'"); c != len(outs) {
		t.Fatalf("%d rows sent, want %d", c, len(outs))
	}
}
