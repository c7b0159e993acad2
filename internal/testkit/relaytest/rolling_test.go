package relaytest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestRollingDeployDeadLettersNothing: two relay processes on one
// database, the second with one more route (audit.*), as in a rolling
// deploy. While both run, no audit message goes dead: those in the
// first relay's partitions wait, uncharged. Then:
//   - the first stops: the second delivers every audit message;
//   - the second stops instead: the first, alone and without the route,
//     makes the waiting ones dead with "no route";
//   - both keep running past the first's --no-route-grace: the waiting
//     ones go dead with the reason.
func TestRollingDeployDeadLettersNothing(t *testing.T) {
	for _, end := range []string{"old stops", "new stops", "grace"} {
		t.Run(end, func(t *testing.T) {
			db := testdb.New(t, store.Postgres)
			e := relaytest.NewEnqueuer(t, db)
			rec, url := newReceiver(t, func(string) (int, http.Header) { return http.StatusOK, nil })
			grace := "10m"
			if end == "grace" {
				grace = "3s"
			}
			old := relaytest.StartRelay(t, db.URL, "--id", "old", "--route", "order.*="+url, "--no-route-grace", grace)
			relaytest.WaitFor(t, time.Minute, "the old relay to hold the partitions", func() bool {
				return db.Count(t, "SELECT count(*) FROM outbox_leases WHERE owner = 'old' AND expires_at > now()") == 64
			})
			young := relaytest.StartRelay(t, db.URL, "--id", "new", "--route", "order.*="+url, "--route", "audit.*="+url)
			relaytest.WaitFor(t, time.Minute, "the partitions shared", func() bool {
				return db.Count(t, "SELECT count(*) FROM outbox_leases WHERE owner = 'new' AND expires_at > now()") == 32 &&
					db.Count(t, "SELECT count(*) FROM outbox_leases WHERE owner = 'old' AND expires_at > now()") == 32
			})
			var status struct {
				Relays      []struct{ ID string }
				RoutesAgree bool `json:"routes_agree"`
			}
			young.Status(t, &status)
			if len(status.Relays) != 2 || status.RoutesAgree {
				t.Fatalf("status: relays %+v, routes_agree %v; want both, disagreeing", status.Relays, status.RoutesAgree)
			}
			const n = 200
			enqueue(t, e, n, func(i int) outbox.Message {
				topic := "audit.logged"
				if i%4 == 0 {
					topic = "order.created"
				}
				return outbox.Message{Topic: topic, Key: fmt.Sprintf("k%d", i%40), Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
			})
			audits := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 'audit.logged'")
			inOld := `SELECT count(*) FROM outbox_messages AS m JOIN outbox_leases AS l ON l.partition_no = m.partition_no
WHERE m.topic = 'audit.logged' AND l.owner = 'old'`
			waiting := db.Count(t, inOld)
			if waiting == 0 || waiting == audits {
				t.Fatalf("%d of %d audit messages in the old relay's partitions; the keys should spread", waiting, audits)
			}
			if end == "grace" {
				relaytest.WaitFor(t, time.Minute, "the grace to run out", func() bool {
					return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending'") == 0
				})
				dead := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead' AND topic = 'audit.logged' AND last_error LIKE '%did not agree within 3s%'")
				if dead != waiting || relaytest.Count(t, db, store.StatusDead) != waiting {
					t.Fatalf("%d dead past the grace (%d dead in all), want the %d in the old relay's partitions", dead, relaytest.Count(t, db, store.StatusDead), waiting)
				}
				return
			}
			// Every message the old relay cannot route has been read and
			// put back, and every other one delivered: nothing is dead.
			relaytest.WaitFor(t, time.Minute, "everything but the waiting audit messages delivered", func() bool {
				return rec.count() == n-waiting
			})
			relaytest.WaitFor(t, time.Minute, "the old relay to put the audit messages back", func() bool {
				return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND last_error LIKE '%waiting, as relay new may route it%'") > 0
			})
			if d := relaytest.Count(t, db, store.StatusDead); d != 0 {
				t.Fatalf("%d dead while both relays run", d)
			}
			if c := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND attempts > 0"); c != 0 {
				t.Fatalf("%d waiting messages were charged an attempt", c)
			}
			if old.Logged("no route for a topic that another live relay may route") != 1 {
				t.Fatalf("the old relay logged the waiting topic %d times, want once", old.Logged("no route for a topic that another live relay may route"))
			}
			switch end {
			case "old stops":
				old.Stop(t)
				relaytest.WaitFor(t, time.Minute, "every message delivered by the new relay", func() bool { return rec.count() == n })
				if d := relaytest.Count(t, db, store.StatusDead); d != 0 {
					t.Fatalf("%d dead", d)
				}
			case "new stops":
				young.Stop(t)
				relaytest.WaitFor(t, time.Minute, "the waiting messages dead", func() bool {
					return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending'") == 0
				})
				if d := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'dead' AND last_error = 'no route for topic "audit.logged"'`); d != waiting {
					t.Fatalf("%d dead with no route, want %d", d, waiting)
				}
			}
		})
	}
}
