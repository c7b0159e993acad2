package relaytest_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testmariadb"
	"github.com/txoutbox/outbox/internal/testkit/testpgbouncer"
)

// idleArgs keep a relay from reading again for ten minutes once it is
// idle: a delivery within the tests' timeouts proves something woke it.
// The lease TTL is the default's: under a loaded CI machine a shorter one
// lets the leases lapse between slow renewals, and a relay without valid
// leases reads nothing.
var idleArgs = []string{"--min-poll", "10m", "--max-poll", "10m"}

// wakesOnPlainInsert starts a relay on dbURL delivering to a webhook,
// lets it deliver a first row (insert writes row seq) and go idle, then
// writes a second row the way a producer in another language does, with
// no signal of any kind: the relay's change probe must find it long
// before its next poll.
func wakesOnPlainInsert(t *testing.T, dbURL string, insert func(seq int), args ...string) *relaytest.Process {
	t.Helper()
	h, url := newHooks(t, false, nil)
	insert(0)
	p := relaytest.StartRelay(t, dbURL, append(append([]string{"--to", url}, idleArgs...), args...)...)
	relaytest.WaitFor(t, 60*time.Second, "the first row delivered", func() bool { return h.distinct() == 1 })
	// After a round that found rows the relay reads once more a few
	// milliseconds later, then waits for --min-poll; on PostgreSQL it
	// asks for notifications (and reads once more) after 200 ms of
	// quiet. Let all that pass, so that only the wake-up under test can
	// find the next row.
	time.Sleep(1500 * time.Millisecond)
	insert(1)
	relaytest.WaitFor(t, 60*time.Second, "the plain-SQL row delivered with the relay idle", func() bool { return h.distinct() == 2 })
	return p
}

// plainInsert writes row seq to outbox_messages in the contract's
// minimal form.
func plainInsert(t *testing.T, db *testdb.DB) func(int) {
	return func(seq int) {
		db.Exec(t, testdb.Placeholder(db.Dialect, "INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('order.created', ?, ?)"),
			"order-42", fmt.Sprintf(`{"seq":%d}`, seq))
	}
}

// TestProbeWakesIdleRelay: on every database a row written by plain SQL,
// and one written to each adopted table, reach an idle relay in another
// process before its next poll, ten minutes away.
func TestProbeWakesIdleRelay(t *testing.T) {
	relaytest.KeepBinary(t)
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			db := testdb.New(t, d)
			p := wakesOnPlainInsert(t, db.URL, plainInsert(t, db))
			var st struct {
				Relays []struct {
					Wake string `json:"wake"`
				} `json:"relays"`
			}
			p.Status(t, &st)
			// PostgreSQL: the trigger of schema version 18 notifies the
			// idle relay; SQLite on Linux: the relay watches the file;
			// elsewhere it probes.
			want := "probe 25ms"
			switch {
			case d == store.Postgres:
				want = "notify"
			case d == store.SQLite && runtime.GOOS == "linux":
				want = "watch"
			}
			if len(st.Relays) != 1 || st.Relays[0].Wake != want {
				t.Errorf("outbox status --json relays: %+v, want one relay with wake %q", st.Relays, want)
			}
			p.Stop(t)
		})
		t.Run(string(d)+"/adopt-laravel", func(t *testing.T) {
			db := testdb.New(t, d)
			adopttest.Create(t, db, "laravel")
			p := wakesOnPlainInsert(t, db.URL, func(seq int) { adopttest.Insert(t, db, "laravel", seq, 1, "order.created") }, "--adopt", "laravel")
			// The adopted table's relay is listed with its wake-up by
			// `outbox status --adopt`, and not among outbox_messages'.
			var st struct {
				Relays []struct {
					Table string `json:"table"`
					Wake  string `json:"wake"`
				} `json:"relays"`
			}
			p.Status(t, &st, "--adopt", "laravel")
			want := "probe 25ms"
			if d == store.SQLite && runtime.GOOS == "linux" {
				want = "watch"
			}
			if len(st.Relays) != 1 || st.Relays[0].Table != "local_messages" || !strings.HasSuffix(st.Relays[0].Wake, want) {
				t.Errorf("outbox status --adopt laravel --json relays: %+v, want one relay of local_messages waking by %q", st.Relays, want)
			}
			st.Relays = nil
			p.Status(t, &st)
			if len(st.Relays) != 0 {
				t.Errorf("outbox status --json lists the adopted table's relay among outbox_messages': %+v", st.Relays)
			}
			p.Stop(t)
		})
	}
	// An adopted table given the trigger `outbox adopt sql` prints wakes
	// the relay with no probe at all.
	// (Laravel's rows are due at once; Spring's carry a next_retry_time
	// that PostgreSQL's LOCALTIMESTAMP(0) may round up into the next
	// second.)
	t.Run("postgres/adopt-laravel-trigger", func(t *testing.T) {
		db := testdb.New(t, store.Postgres)
		adopttest.Create(t, db, "laravel")
		db.Exec(t, adoptstore.WakeTriggerSQL("local_messages"))
		p := wakesOnPlainInsert(t, db.URL, func(seq int) { adopttest.Insert(t, db, "laravel", seq, 1, "order.created") }, "--adopt", "laravel", "--no-probe")
		p.Stop(t)
	})
}

// TestProbeWakesIdleRelayThroughPgBouncer: behind PgBouncer in
// transaction mode, where LISTEN cannot work and the relay says so, the
// probe still wakes it for a plain-SQL row written straight to the
// server.
// TestBinlogWakesIdleRelay: on a MariaDB server that writes a binary
// log, a relay in another process follows it (`--binlog` defaults to
// auto) and a row written by plain SQL, to outbox_messages and to an
// adopted table, reaches it before its next poll; status says "binlog".
func TestBinlogWakesIdleRelay(t *testing.T) {
	relaytest.KeepBinary(t)
	my := testmariadb.Start(t, "--log-bin=binlog", "--server-id=7")
	db := testdb.MySQLAt(t, my.URL)
	testdb.Migrate(t, db)
	adopttest.Create(t, db, "laravel")
	for _, tc := range []struct {
		name   string
		insert func(int)
		args   []string
	}{
		{"outbox_messages", plainInsert(t, db), nil},
		{"adopt-laravel", func(seq int) { adopttest.Insert(t, db, "laravel", seq, 1, "order.created") }, []string{"--adopt", "laravel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := wakesOnPlainInsert(t, db.URL, tc.insert, tc.args...)
			var st struct {
				Relays []struct {
					Wake string `json:"wake"`
				} `json:"relays"`
			}
			p.Status(t, &st, tc.args...)
			if len(st.Relays) != 1 || st.Relays[0].Wake != "binlog" {
				t.Errorf("outbox status --json relays: %+v, want one relay with wake \"binlog\"", st.Relays)
			}
			p.Stop(t)
		})
	}
	// --binlog off: the relay probes instead.
	p := relaytest.StartRelay(t, db.URL, "--to", "stdout:", "--binlog", "off")
	relaytest.WaitFor(t, 30*time.Second, "the relay probing", func() bool {
		var st struct {
			Relays []struct {
				Wake string `json:"wake"`
			} `json:"relays"`
		}
		p.Status(t, &st)
		return len(st.Relays) == 1 && st.Relays[0].Wake == "probe 25ms"
	})
	p.Stop(t)
}

func TestProbeWakesIdleRelayThroughPgBouncer(t *testing.T) {
	relaytest.KeepBinary(t)
	name := testdb.PostgresDatabase(t)
	direct := testdb.WithDatabase(testdb.PostgresURL, name)
	db := testdb.PostgresAt(t, direct)
	testdb.Migrate(t, db)
	b := testpgbouncer.Start(t, "127.0.0.1:5432")
	p := wakesOnPlainInsert(t, b.URL(name), plainInsert(t, db))
	p.Stop(t)
}
