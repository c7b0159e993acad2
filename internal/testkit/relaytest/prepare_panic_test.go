//go:build outbox_failpoints

package relaytest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestEmbeddedRelaySurvivesAPanicOnOneRow: a relay embedded in an
// application (here, the test process) meets a row whose preparation
// panics. The application keeps running, the row is dead with the panic
// as its reason, and the rows around it, and those written afterwards,
// are delivered.
func TestEmbeddedRelaySurvivesAPanicOnOneRow(t *testing.T) {
	const poison = "0b9d6c1e-3f7a-4b7e-9a51-2d1f3c4e5a6b"
	if err := failpoint.Set("prepare=panic:" + poison); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = failpoint.Set("") })
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			db := testdb.New(t, d)
			good := func(from, n int) {
				for i := from; i < from+n; i++ {
					db.Exec(t, testdb.Placeholder(d, "INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('app.created', ?, ?)"),
						fmt.Sprintf("k-%d", i%3), fmt.Sprintf(`{"n":%d}`, i))
				}
			}
			good(0, 10)
			db.Exec(t, testdb.Placeholder(d, "INSERT INTO outbox_messages (message_id, topic, business_key, payload) VALUES (?, 'app.created', 'k-0', '{}')"), poison)
			good(10, 10)
			rec := newRecorder()
			relaytest.Start(t, db, relaytest.Config(rec))
			relaytest.WaitFor(t, 30*time.Second, "no row pending", func() bool { return relaytest.Count(t, db, "pending") == 0 })
			good(20, 10)
			relaytest.WaitFor(t, 30*time.Second, "the rows written afterwards sent", func() bool { return relaytest.Count(t, db, "sent") == 30 })
			reason := db.Strings(t, "SELECT last_error FROM outbox_messages WHERE status = 'dead'")
			if want := "preparing the message panicked: failpoint prepare (message " + poison + "): panic"; len(reason) != 1 || reason[0] != want {
				t.Errorf("dead letters' reasons %q, want [%q]", reason, want)
			}
			if _, ok := rec.envelope(poison); ok {
				t.Error("the row whose preparation panicked was published")
			}
			for _, id := range db.Strings(t, "SELECT "+textOf(d, "message_id")+" FROM outbox_messages WHERE status = 'sent'") {
				if _, ok := rec.envelope(id); !ok {
					t.Errorf("message %s is sent but was not delivered", id)
				}
			}
		})
	}
}
