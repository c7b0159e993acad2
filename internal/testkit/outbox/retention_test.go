package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// oldRow is a message inserted by plain SQL with its status and times set
// in the past.
type oldRow struct {
	topic               string
	status              string
	created, last, sent time.Duration // ages; last is available_at
}

func insertOld(t *testing.T, db *testdb.DB, rows ...oldRow) {
	t.Helper()
	for _, r := range rows {
		sent, consumed := "NULL", "NULL"
		if r.status == "sent" || r.status == "consumed" {
			sent = testdb.Ago(db.Dialect, r.sent)
		}
		if r.status == "consumed" {
			consumed = sent
		}
		db.Exec(t, fmt.Sprintf(`INSERT INTO outbox_messages (topic, payload, status, created_at, available_at, sent_at, consumed_at)
VALUES ('%s', '{}', '%s', %s, %s, %s, %s)`, r.topic, r.status, testdb.Ago(db.Dialect, r.created), testdb.Ago(db.Dialect, r.last), sent, consumed))
	}
}

func topics(t *testing.T, db *testdb.DB, table string) []string {
	t.Helper()
	return db.Strings(t, "SELECT topic FROM "+table+" ORDER BY id")
}

// sweeps records retention reports.
type sweeps struct {
	mu   sync.Mutex
	reps []outbox.RetentionReport
}

func (s *sweeps) record(r outbox.RetentionReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reps = append(s.reps, r)
}

// by returns how many sweeps relay ran and how many rows they removed.
func (s *sweeps) by(relay string) (n int, removed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reps {
		if r.Relay == relay {
			n++
			removed += r.Removed
		}
	}
	return n, removed
}

func (s *sweeps) errs() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []error
	for _, r := range s.reps {
		if r.Err != nil {
			out = append(out, r.Err)
		}
	}
	return out
}

func retentionConfig(s *sweeps, archive bool) *outbox.RelayConfig {
	cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(newSink().publish)})
	cfg.Retention = &outbox.RetentionConfig{
		Sent: time.Hour, Dead: 4 * time.Hour, Archive: archive,
		BatchSize: 2, Interval: 20 * time.Millisecond, OnSweep: s.record,
	}
	return cfg
}

// TestRetentionRemovesExpiredMessages: the relay removes (or archives)
// sent, consumed and dead messages past their retention, in batches, and
// keeps recent ones and every pending one, however old.
func TestRetentionRemovesExpiredMessages(t *testing.T) {
	for _, archive := range []bool{false, true} {
		t.Run(fmt.Sprintf("archive=%v", archive), func(t *testing.T) {
			harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
				db := h.DB
				const day = 24 * time.Hour
				insertOld(t, db,
					oldRow{topic: "sent.old", status: "sent", created: 3 * time.Hour, last: 3 * time.Hour, sent: 2 * time.Hour},
					oldRow{topic: "pending.delayed", status: "pending", created: 10 * day, last: -day},
					oldRow{topic: "consumed.old", status: "consumed", created: 3 * time.Hour, last: 3 * time.Hour, sent: 90 * time.Minute},
					oldRow{topic: "sent.late", status: "sent", created: 9 * time.Hour, last: 9 * time.Hour, sent: 10 * time.Minute},
					oldRow{topic: "dead.old", status: "dead", created: 6 * time.Hour, last: 5 * time.Hour},
					oldRow{topic: "dead.retried", status: "dead", created: 6 * time.Hour, last: 2 * time.Hour},
					oldRow{topic: "pending.waiting", status: "pending", created: 5 * day, last: -2 * day},
					oldRow{topic: "sent.recent", status: "sent", created: time.Minute, last: time.Minute, sent: time.Minute},
				)
				var s sweeps
				r := newRelay(t, h, retentionConfig(&s, archive))
				relaytest.Run(t, r)
				kept := []string{"pending.delayed", "sent.late", "dead.retried", "pending.waiting", "sent.recent"}
				relaytest.WaitFor(t, 30*time.Second, "sweeps reporting 3 rows removed", func() bool {
					_, removed := s.by(r.ID())
					return removed >= 3
				})
				if got := topics(t, db, "outbox_messages"); !slices.Equal(got, kept) {
					t.Fatalf("kept %v, want %v", got, kept)
				}
				if db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending'") != 2 {
					t.Fatal("a pending row changed")
				}
				archived := topics(t, db, "outbox_messages_archive")
				want := []string{"sent.old", "consumed.old", "dead.old"}
				if !archive {
					want = nil
				}
				if !slices.Equal(archived, want) {
					t.Fatalf("archive holds %v, want %v", archived, want)
				}
				n, removed := s.by(r.ID())
				if n == 0 || removed != 3 {
					t.Fatalf("%d sweeps removed %d rows, want 3", n, removed)
				}
				if errs := s.errs(); len(errs) > 0 {
					t.Fatalf("sweep errors: %v", errs)
				}
			})
		})
	}
}

// TestRetentionRemovesDeliveredMessages: with a short retention, messages
// the relay delivered are all removed soon after, including one the
// sweeps first passed over because it was sent late.
func TestRetentionRemovesDeliveredMessages(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		db := h.DB
		insertOld(t, db, oldRow{topic: "sent.late", status: "sent", created: time.Hour, last: time.Hour, sent: 0})
		var s sweeps
		sink := newSink()
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(sink.publish)})
		cfg.Retention = &outbox.RetentionConfig{Sent: 2 * time.Second, Dead: time.Hour, BatchSize: 50, Interval: 20 * time.Millisecond, OnSweep: s.record}
		r := newRelay(t, h, cfg)
		relaytest.Run(t, r)
		const n = 300
		enqueue(t, h, context.Background(), msgs(n, "order.created", func(i int) string { return fmt.Sprint(i % 7) }))
		relaytest.WaitFor(t, 30*time.Second, "every message delivered", func() bool { return sink.distinct() == n })
		relaytest.WaitFor(t, 30*time.Second, "every message removed", func() bool {
			return db.Count(t, "SELECT count(*) FROM outbox_messages") == 0
		})
		relaytest.WaitFor(t, 10*time.Second, "sweeps reporting every removal", func() bool {
			_, removed := s.by(r.ID())
			return removed == n+1
		})
		if sink.total() < n {
			t.Fatalf("%d deliveries for %d messages", sink.total(), n)
		}
	})
}

// TestRetentionSweepsRowsBelowTheMark: a row that appears with an id
// below those retention already removed (rows `outbox replay --archive`
// puts back keep their ids; a transaction held open across retention
// commits a low id late) is removed by the next full sweep, not only when
// the relay forgets where it had swept to (every 6 hours).
func TestRetentionSweepsRowsBelowTheMark(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		db := h.DB
		for range 5 {
			insertOld(t, db, oldRow{topic: "sent.old", status: "sent", created: time.Hour, last: time.Hour, sent: time.Hour})
		}
		low := db.Count(t, "SELECT min(id) FROM outbox_messages")
		var s sweeps
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(newSink().publish)})
		// A full sweep every 200 ms (a tenth of the shorter retention).
		cfg.Retention = &outbox.RetentionConfig{Sent: 2 * time.Second, Dead: 2 * time.Second, BatchSize: 2, Interval: 20 * time.Millisecond, OnSweep: s.record}
		r := newRelay(t, h, cfg)
		relaytest.Run(t, r)
		relaytest.WaitFor(t, 30*time.Second, "the old rows removed", func() bool {
			return db.Count(t, "SELECT count(*) FROM outbox_messages") == 0
		})
		relaytest.WaitFor(t, 10*time.Second, "more sweeps after the removal", func() bool {
			n, _ := s.by(r.ID())
			return n >= 5
		})
		ts := func(d time.Duration) string { return testdb.Ago(db.Dialect, d) }
		insert := fmt.Sprintf(`INSERT INTO outbox_messages (id, topic, payload, status, created_at, available_at, sent_at)
VALUES (%d, 'sent.back', '{}', 'sent', %s, %s, %s)`, low+1, ts(time.Hour), ts(time.Hour), ts(time.Hour))
		db.Exec(t, insert)
		relaytest.WaitFor(t, 30*time.Second, "the row below the removed ones removed", func() bool {
			return db.Count(t, "SELECT count(*) FROM outbox_messages") == 0
		})
		if errs := s.errs(); len(errs) > 0 {
			t.Fatalf("sweep errors: %v", errs)
		}
	})
}

// leaseOwner is the relay holding partition 0.
func leaseOwner(t *testing.T, db *testdb.DB) string {
	t.Helper()
	var owner *string
	if err := db.SQL.QueryRow("SELECT owner FROM outbox_leases WHERE partition_no = 0").Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if owner == nil {
		return ""
	}
	return *owner
}

// TestRetentionRunsOnOneRelay: of two relays only the one holding
// partition 0 sweeps; when it stops, the other takes over.
func TestRetentionRunsOnOneRelay(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		db := h.DB
		var s sweeps
		cfgA := retentionConfig(&s, false)
		cfgA.ID = "relay-a"
		a := newRelay(t, h, cfgA)
		stopA := relaytest.Run(t, a)
		relaytest.WaitFor(t, 30*time.Second, "relay-a holding partition 0", func() bool { return leaseOwner(t, db) == "relay-a" })
		cfgB := retentionConfig(&s, false)
		cfgB.ID = "relay-b" // sorts after relay-a: partition 0 stays with a
		b := newRelay(t, h, cfgB)
		relaytest.Run(t, b)
		expired := oldRow{topic: "sent.old", status: "sent", created: 3 * time.Hour, last: 3 * time.Hour, sent: 2 * time.Hour}
		for range 5 {
			insertOld(t, db, expired)
		}
		relaytest.WaitFor(t, 30*time.Second, "sweeps reporting 5 rows removed", func() bool {
			_, removed := s.by("relay-a")
			return removed >= 5
		})
		if n, removed := s.by("relay-a"); n == 0 || removed != 5 {
			t.Fatalf("relay-a ran %d sweeps removing %d rows, want 5", n, removed)
		}
		if n, _ := s.by("relay-b"); n != 0 {
			t.Fatalf("relay-b ran %d sweeps while relay-a held partition 0", n)
		}

		stopA()
		relaytest.WaitFor(t, 30*time.Second, "relay-b holding partition 0", func() bool { return leaseOwner(t, db) == "relay-b" })
		for range 3 {
			insertOld(t, db, expired)
		}
		relaytest.WaitFor(t, 30*time.Second, "expired rows removed by relay-b", func() bool {
			_, removed := s.by("relay-b")
			return removed == 3
		})
		if c := db.Count(t, "SELECT count(*) FROM outbox_messages"); c != 0 {
			t.Fatalf("%d rows left", c)
		}
	})
}

// TestRetentionShutdownMidSweep: stopping the relay while it archives
// leaves every message in exactly one of the two tables; the next relay
// finishes the job without duplicating anything.
func TestRetentionShutdownMidSweep(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		db := h.DB
		const n = 1000
		enqueue(t, h, context.Background(), msgs(n, "order.created", nil))
		old := testdb.Ago(db.Dialect, 3*time.Hour)
		db.Exec(t, "UPDATE outbox_messages SET status = 'sent', created_at = "+old+", available_at = "+old+", sent_at = "+old)

		var s sweeps
		cfg := retentionConfig(&s, true)
		cfg.Retention.BatchSize = 5
		r := newRelay(t, h, cfg)
		stop := relaytest.Run(t, r)
		relaytest.WaitFor(t, 30*time.Second, "archiving under way", func() bool {
			return db.Count(t, "SELECT count(*) FROM outbox_messages_archive") > 0
		})
		stop()
		live := db.Count(t, "SELECT count(*) FROM outbox_messages")
		archived := db.Count(t, "SELECT count(*) FROM outbox_messages_archive")
		if live+archived != n {
			t.Fatalf("after shutdown %d live + %d archived rows, want %d in all", live, archived, n)
		}
		if archived == n {
			t.Fatalf("the sweep finished before shutdown; the test needs more rows")
		}
		if both := db.Count(t, "SELECT count(*) FROM outbox_messages AS m JOIN outbox_messages_archive AS a ON a.id = m.id"); both != 0 {
			t.Fatalf("%d rows both live and archived", both)
		}

		cfg2 := retentionConfig(&s, true)
		cfg2.Retention.BatchSize = 100
		r2 := newRelay(t, h, cfg2)
		relaytest.Run(t, r2)
		relaytest.WaitFor(t, 60*time.Second, "every row archived", func() bool {
			return db.Count(t, "SELECT count(*) FROM outbox_messages") == 0
		})
		if c := db.Count(t, "SELECT count(DISTINCT message_id) FROM outbox_messages_archive"); c != n {
			t.Fatalf("%d distinct messages archived, want %d", c, n)
		}
		if c := db.Count(t, "SELECT count(*) FROM outbox_messages_archive"); c != n {
			t.Fatalf("%d archived rows, want %d", c, n)
		}
	})
}

func TestRetentionConfigValidation(t *testing.T) {
	db := testdb.New(t, store.SQLite)
	for _, c := range []struct {
		cfg  outbox.RetentionConfig
		want string
	}{
		{outbox.RetentionConfig{Sent: -time.Second}, "RetentionConfig.Sent"},
		{outbox.RetentionConfig{Dead: -time.Second}, "RetentionConfig.Dead"},
		{outbox.RetentionConfig{BatchSize: -1}, "RetentionConfig.BatchSize"},
		{outbox.RetentionConfig{Interval: -time.Second}, "RetentionConfig.Interval"},
	} {
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(newSink().publish)})
		cfg.Retention = &c.cfg
		_, err := outbox.NewRelay(db.Std, cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: error %v, want one line naming %s", c.cfg, err, c.want)
		}
	}
}
