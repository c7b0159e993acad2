package cli

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestSnapshotReadCommands: migrate --read-path snapshot enables the
// snapshot read on PostgreSQL (again: nothing changes), and so does the
// SQL migrate sql --read-path snapshot prints; both refuse other values
// and databases; a relay must match the database's read path; a
// message the snapshot read delivered counts as sent in outbox status, and
// outbox replay sends it again; migrate --read-path table turns it off.
func TestSnapshotReadCommands(t *testing.T) {
	t.Parallel()
	lite := testdb.New(t, store.SQLite)
	run(t, dbVars(lite), "migrate", "--read-path", "snapshot").failed(t, ExitUsage, "needs PostgreSQL")
	run(t, dbVars(lite), "migrate", "--read-path", "fast").failed(t, ExitUsage, "snapshot")
	run(t, dbVars(lite), "migrate", "--read-path", "snapshot", "--partitioned").failed(t, ExitUsage, "--partitioned")
	run(t, dbVars(lite), "relay", "--to", "stdout://", "--read-path", "fast").failed(t, ExitUsage, "table or snapshot")

	run(t, nil, "migrate", "sql", "--dialect", "mysql", "--read-path", "snapshot").failed(t, ExitUsage, "needs PostgreSQL")
	run(t, nil, "migrate", "sql", "--dialect", "postgres", "--read-path", "snapshot", "--format", "goose", "--out", t.TempDir()).failed(t, ExitUsage, "not a versioned migration")
	// The printed step, applied by hand to a schema at the newest version,
	// enables it too.
	printed := testdb.New(t, store.Postgres)
	version, err := store.SchemaVersion(context.Background(), printed.Store().DB())
	if err != nil {
		t.Fatal(err)
	}
	newest := strconv.Itoa(version)
	printed.Exec(t, run(t, nil, "migrate", "sql", "--dialect", "postgres", "--read-path", "snapshot", "--from", newest).ok(t).stdout)
	if on, err := printed.Store().SnapshotReadEnabled(context.Background()); err != nil || !on {
		t.Fatalf("snapshot read enabled by the printed SQL: %v %v", on, err)
	}

	db := testdb.New(t, store.Postgres)
	for range 2 {
		run(t, dbVars(db), "migrate", "--read-path", "snapshot").ok(t)
	}
	if on, err := db.Store().SnapshotReadEnabled(context.Background()); err != nil || !on {
		t.Fatalf("snapshot read enabled: %v %v", on, err)
	}
	if r := run(t, dbVars(db), "relay", "--to", "stdout://"); r.code != ExitFailure || !strings.Contains(r.stderr, "read by snapshots") {
		t.Fatalf("a table relay on a snapshot read database: exit %d\n%s", r.code, r.stderr)
	}

	id := enqueueOK(t, dbVars(db), "--topic", "order.created", "--payload", "{}")
	relayUntilDelivered(t, db, id, os.Interrupt, "--read-path", "snapshot")
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND sent_at IS NULL`); n != 1 {
		t.Fatalf("%d untouched rows, want the delivered message's", n)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(run(t, dbVars(db), "status", "--json").ok(t).stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st["sent"] != 1.0 || st["pending"] != 0.0 {
		t.Fatalf("status sent %v pending %v, want 1 and 0", st["sent"], st["pending"])
	}
	// replay finds the delivered message and moves it to the table, where
	// a relay reads it again.
	run(t, dbVars(db), "replay", "--id", id).ok(t)
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND outbox_txid IS NULL`); n != 1 {
		t.Fatalf("after replay: %d rows pending in the table domain, want 1", n)
	}
	relayUntilDelivered(t, db, id, os.Interrupt, "--read-path", "snapshot")
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'sent'`); n != 1 {
		t.Fatalf("after the replayed message was delivered: %d sent, want 1", n)
	}

	// Turned off (every relay stopped): the delivered message is sent, and
	// table relays run again.
	id2 := enqueueOK(t, dbVars(db), "--topic", "order.created", "--payload", "{}")
	relayUntilDelivered(t, db, id2, os.Interrupt, "--read-path", "snapshot")
	run(t, dbVars(db), "migrate", "--read-path", "sideways").failed(t, ExitUsage, "snapshot", "table")
	if out := run(t, dbVars(db), "migrate", "--read-path", "table").ok(t).stdout; !strings.Contains(out, "1 delivered messages marked sent") {
		t.Fatalf("migrate --read-path table said %q", out)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'sent'`); n != 2 {
		t.Fatalf("after the turn-off: %d sent, want 2", n)
	}
	if out := run(t, dbVars(db), "migrate", "--read-path", "table").ok(t).stdout; !strings.Contains(out, "already") {
		t.Fatalf("a second turn-off said %q", out)
	}
	id3 := enqueueOK(t, dbVars(db), "--topic", "order.created", "--payload", "{}")
	relayUntilDelivered(t, db, id3, os.Interrupt)
}
