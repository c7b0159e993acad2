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

// TestRetryBudgetByAge: a message the webhook always answers 500, with
// max_attempts 1000 on a route with max_retry_age=5s and a 200 ms retry
// schedule, goes dead on its budget, not its attempts: no sooner than
// its next retry would pass the 5 s, and with the budget as its reason.
// The 20 messages beside it are sent.
func TestRetryBudgetByAge(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	_, url := newReceiver(t, failing("bad", http.StatusInternalServerError))
	// The relay first, holding its partitions: the budget counts from
	// created_at.
	p := relaytest.StartRelay(t, db.URL, "--to", url+"?max_retry_age=5s", "--retry-schedule", "200ms")
	relaytest.WaitFor(t, time.Minute, "the relay holding its partitions", func() bool { return p.Logged("partitions changed") > 0 })
	enqueue(t, e, 21, func(i int) outbox.Message {
		m := plain(i)
		if i == 10 {
			m.Payload = fmt.Appendf(nil, `{"bad":%d}`, i)
			m.MaxAttempts = 1000
		}
		return m
	})
	relaytest.WaitFor(t, time.Minute, "20 sent, 1 dead", func() bool {
		sent, dead := counts(t, db)
		return sent == 20 && dead == 1
	})
	p.Stop(t)
	if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'dead'
		AND last_error LIKE 'retry budget (5s) spent after % attempts: %500%'
		AND attempts > 1 AND attempts < 1000 AND now() - created_at > interval '4800 milliseconds'`); n != 1 {
		var reason string
		var attempts int
		if err := db.SQL.QueryRow("SELECT last_error, attempts FROM outbox_messages WHERE status = 'dead'").Scan(&reason, &attempts); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("dead after %d attempts with %q, want the retry budget of 5s spent", attempts, reason)
	}
	if p.Logged("retry horizon") == 0 || p.Logged("max_retry_age=5s") == 0 {
		t.Fatalf("no retry horizon logged at start:\n%s", p.Log())
	}
}
