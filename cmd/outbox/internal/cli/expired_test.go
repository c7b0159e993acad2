package cli

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestExpiredMessages: status counts expired messages; dead list,
// requeue and discard take them with --expired and leave the dead ones;
// a requeued one is pending without its expiry.
func TestExpiredMessages(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		vars := dbVars(db)
		var ids []string
		for range 3 {
			ids = append(ids, enqueueOK(t, vars, "--topic", "order.stale", "--payload", "{}"))
		}
		enqueueOK(t, vars, "--topic", "order.failed", "--payload", "{}")
		markDead(t, db, "order.failed")
		db.Exec(t, "UPDATE outbox_messages SET status = 'expired', last_error = 'expired: its expires_at came before it was delivered', expires_at = "+
			testdb.Ago(d, 0)+" WHERE topic = 'order.stale'")

		var st store.StatsJSON
		run(t, vars, "status", "--json").ok(t).decode(t, &st)
		if st.Expired != 3 || st.Dead != 1 {
			t.Fatalf("status: expired %d, dead %d", st.Expired, st.Dead)
		}
		if out := run(t, vars, "status").ok(t).stdout; !strings.Contains(out, "expired") {
			t.Errorf("status table without the expired row:\n%s", out)
		}
		var listed []deadJSON
		run(t, vars, "dead", "list", "--expired", "--json").ok(t).decode(t, &listed)
		if len(listed) != 3 || listed[0].Topic != "order.stale" {
			t.Fatalf("dead list --expired: %+v", listed)
		}
		if r := run(t, vars, "dead", "requeue", "--expired", "--id", ids[0]).ok(t); r.stdout != "requeued 1 expired message\n" {
			t.Errorf("requeue: %q", r.stdout)
		}
		if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND expires_at IS NULL AND topic = 'order.stale'"); n != 1 {
			t.Errorf("%d requeued without expiry, want 1", n)
		}
		if r := run(t, vars, "dead", "discard", "--expired", "--all").ok(t); r.stdout != "discarded 2 expired messages\n" {
			t.Errorf("discard: %q", r.stdout)
		}
		if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead'"); n != 1 {
			t.Errorf("%d dead left, want 1", n)
		}
		run(t, vars, "dead", "list", "--expired", "--adopt", "spring").failed(t, ExitUsage, "no expired messages")
	})
}
