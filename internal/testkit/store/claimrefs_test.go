package store_test

import (
	"context"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestClaimRefsSeesDayArchives: a row that retention kept in a day
// partition's archive (outbox_messages_archive_YYYYMMDD, partitioned
// PostgreSQL) still holds its blob against the orphan sweep; once that
// archive is gone, nothing does.
func TestClaimRefsSeesDayArchives(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	ctx := context.Background()
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ('claim.day', '', '{"outbox-claim-check":"file:kept-by-day"}')`)
	id := db.Strings(t, "SELECT message_id::text FROM outbox_messages")[0]
	db.Exec(t, "CREATE TABLE outbox_messages_archive_20260101 AS SELECT * FROM outbox_messages")
	db.Exec(t, "DELETE FROM outbox_messages")
	refs, err := db.Store().ClaimRefs(ctx, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	if !refs["file:kept-by-day"] {
		t.Errorf("refs %v: the day archive's reference is missing", refs)
	}
	db.Exec(t, "DROP TABLE outbox_messages_archive_20260101")
	if refs, err = db.Store().ClaimRefs(ctx, []string{id}); err != nil || len(refs) != 0 {
		t.Errorf("refs %v, %v after the archive is dropped; want none", refs, err)
	}
}
