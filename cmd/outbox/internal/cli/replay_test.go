package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// deliverAll runs the relay to stdout:// until nothing is pending and
// returns what it printed.
func deliverAll(t *testing.T, db *testdb.DB, vars map[string]string) string {
	t.Helper()
	var stdout, stderr syncbuf.Buffer
	stop := startRelay(t, vars, &stdout, &stderr, "--to", "stdout://", "--lease-ttl", "1s")
	waitFor(t, "nothing pending", func() bool {
		st, err := db.Store().Stats(context.Background())
		return err == nil && st.Pending == 0
	})
	if code := stop(); code != 0 {
		t.Fatalf("relay exit %d\nstderr: %s", code, stderr.String())
	}
	return stdout.String()
}

// TestReplay: delivered messages are replayed by filter and delivered
// again with the same message ids; a dry run changes nothing; more than
// --max needs --yes; every run is audited; archived messages come back
// with --archive.
func TestReplay(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		vars := dbVars(db)
		a := enqueueOK(t, vars, "--topic", "order.created", "--key", "o-1", "--payload", `{"n":1}`)
		b := enqueueOK(t, vars, "--topic", "order.created", "--key", "o-2", "--payload", `{"n":2}`)
		c := enqueueOK(t, vars, "--topic", "order.paid", "--payload", `{"n":3}`)
		first := deliverAll(t, db, vars)
		for _, id := range []string{a, b, c} {
			if strings.Count(first, `"message_id":"`+id+`"`) != 1 {
				t.Fatalf("first delivery of %s:\n%s", id, first)
			}
		}

		r := run(t, vars, "replay", "--topic", "order.created", "--dry-run").ok(t)
		if r.stdout != "would replay 2 delivered messages\n" {
			t.Errorf("dry run: %q", r.stdout)
		}
		if st := status(t, vars); st.Sent != 3 || st.Pending != 0 {
			t.Errorf("a dry run changed the table: %+v", st)
		}
		run(t, vars, "replay", "--topic", "order.created", "--max", "1").failed(t, ExitUsage, "would replay 2 messages, more than --max 1", "--yes")
		if st := status(t, vars); st.Sent != 3 {
			t.Errorf("a refused replay changed the table: %+v", st)
		}
		r = run(t, vars, "replay", "--topic", "order.created", "--max", "1", "--yes", "--batch-size", "1").ok(t)
		if r.stdout != "replayed 2 delivered messages\n" || !strings.Contains(r.stderr, "replay: 1 of 2") {
			t.Errorf("replay: stdout %q stderr %q", r.stdout, r.stderr)
		}
		if st := status(t, vars); st.Pending != 2 || st.Sent != 1 {
			t.Errorf("after replay: %+v", st)
		}
		es, err := db.Store().Audit(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || es[0].Actor != "cli" || es[0].Action != "replay" || es[0].Count != 2 || !strings.Contains(es[0].Target, `"topic":"order.created"`) {
			t.Errorf("audit log %+v", es)
		}

		again := deliverAll(t, db, vars)
		if strings.Count(again, `"message_id":"`+a+`"`) != 1 || strings.Count(again, `"message_id":"`+b+`"`) != 1 || strings.Contains(again, c) {
			t.Errorf("second delivery, want a and b with their ids and not c:\n%s", again)
		}

		// c goes to the archive: only --archive finds it there.
		db.Exec(t, testdb.Placeholder(d, "UPDATE outbox_messages SET sent_at = "+agoSQL(d)+" WHERE message_id = ?"), c)
		if rb, err := db.Store().Retain(context.Background(), 0, 100, store.RetentionPolicy{Sent: time.Hour, Dead: time.Hour, Archive: true}); err != nil || rb.Removed != 1 {
			t.Fatalf("archiving c: %+v %v", rb, err)
		}
		run(t, vars, "replay", "--id", c).failed(t, ExitFailure, "no delivered message with id "+c)
		r = run(t, vars, "replay", "--id", c, "--archive", "--since", "1h").ok(t)
		if r.stdout != "replayed 1 delivered message\n" {
			t.Errorf("replay from the archive: %q", r.stdout)
		}
		if n := db.Count(t, "SELECT count(*) FROM outbox_messages_archive"); n != 0 {
			t.Errorf("%d rows left in the archive", n)
		}
		if third := deliverAll(t, db, vars); strings.Count(third, `"message_id":"`+c+`"`) != 1 {
			t.Errorf("delivery after replay from the archive:\n%s", third)
		}
	})
}

// agoSQL is the database's clock two hours ago.
func agoSQL(d store.Dialect) string {
	switch d {
	case store.Postgres:
		return "now() - interval '2 hours'"
	case store.MySQL:
		return "NOW(6) - INTERVAL 2 HOUR"
	}
	return "strftime('%Y-%m-%d %H:%M:%f', 'now', '-2 hours')"
}
