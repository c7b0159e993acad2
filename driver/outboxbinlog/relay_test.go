package outboxbinlog_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/drivertest"
	"github.com/txoutbox/outbox/driver/outboxbinlog"
	"github.com/txoutbox/outbox/driver/outboxsql"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testmariadb"
	"github.com/txoutbox/outbox/publisher"
)

// relay runs a relay over the database at url with the feed, publishing
// into the returned channel, its log written to the returned buffer.
func relay(t *testing.T, url string, feed *outboxbinlog.Feed) (*outbox.Relay, *dburl.DB, <-chan string, *syncbuf.Buffer) {
	t.Helper()
	db, err := dburl.Open(t.Context(), url)
	if err != nil {
		testdb.Unavailable(t, url, err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 100)
	pub := publisher.Func(func(_ context.Context, env *publisher.Envelope) error {
		got <- string(env.Payload)
		return nil
	})
	logs := &syncbuf.Buffer{}
	cfg := &outbox.RelayConfig{
		Routes: []outbox.Route{{Pattern: "*", Publisher: pub}},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		// Reads back off to an hour: only a wake-up finds a row soon.
		MaxPollInterval: time.Hour,
	}
	if feed != nil {
		cfg.ChangeFeed = feed
	}
	r, err := db.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Go(t, "Run", 20*time.Second, r.Run)
	return r, db, got, logs
}

// waitWake waits until the relay's wake-up is want.
func waitWake(t *testing.T, r *outbox.Relay, want string, logs *syncbuf.Buffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for r.Wake() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the relay's wake-up is %q after 30 s, want %q; its log:\n%s", r.Wake(), want, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// insert writes a message with plain SQL, as a producer in another
// language would.
func insert(t *testing.T, db *dburl.DB, payload string) {
	t.Helper()
	if _, err := db.SQL.ExecContext(t.Context(), "INSERT INTO outbox_messages (topic, payload) VALUES ('order.created', ?)", payload); err != nil {
		t.Fatal(err)
	}
}

func receive(t *testing.T, got <-chan string, want string) {
	t.Helper()
	select {
	case p := <-got:
		if p != want {
			t.Fatalf("published %q, want %q", p, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%q not published within 30 s", want)
	}
}

// TestRelayFollowsTheBinaryLog: a relay given the feed over a server that
// writes a binary log says "binlog" as its wake-up and publishes rows
// written by plain SQL; when the server is killed it says it lost the
// feed and probes; once the server is back it follows the log again and
// delivers what was written meanwhile.
func TestRelayFollowsTheBinaryLog(t *testing.T) {
	s := testmariadb.Start(t, "--log-bin=binlog", "--server-id=7")
	feed, err := outboxbinlog.OpenURL(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	r, db, got, logs := relay(t, s.URL, feed)
	waitWake(t, r, "binlog", logs)
	for i := range 3 {
		p := fmt.Sprintf(`{"n":%d}`, i)
		insert(t, db, p)
		receive(t, got, p)
	}
	s.Kill(t)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(logs.String(), "lost the binlog") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of the lost feed a minute after the server was killed; the log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Restart(t)
	waitWake(t, r, "binlog", logs)
	insert(t, db, `{"n":"after"}`)
	// A message published just before the kill whose settle the kill cut
	// is published again (at least once): skip such repeats.
	for {
		select {
		case p := <-got:
			if p == `{"n":"after"}` {
				return
			}
			if p != `{"n":0}` && p != `{"n":1}` && p != `{"n":2}` {
				t.Fatalf("published %q, want the row written after the restart", p)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the row written after the restart was not published within 30 s")
		}
	}
}

// TestRelayWithoutBinaryLog: over a server that writes none (the shared
// MariaDB), the relay says once why it cannot follow the log, probes, and
// delivers.
func TestRelayWithoutBinaryLog(t *testing.T) {
	feed, err := outboxbinlog.OpenURL(testdb.MySQLURL)
	if err != nil {
		t.Fatal(err)
	}
	r, db, got, logs := relay(t, testdb.Empty(t, store.MySQL).URL, feed)
	waitWake(t, r, "probe 25ms", logs)
	insert(t, db, `{"n":1}`)
	receive(t, got, `{"n":1}`)
	if n := bytes.Count([]byte(logs.String()), []byte("cannot follow the binlog")); n != 1 {
		t.Fatalf("the relay said %d times that it cannot follow the binlog, want once; its log:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "log_bin is OFF") {
		t.Fatalf("the relay's log does not say why:\n%s", logs.String())
	}
}

// feedDriver is the database/sql driver over the private server with the
// feed as its capability, as a driver author would offer it.
type feedDriver struct {
	*outboxsql.Driver
	*outboxbinlog.Feed
}

// TestDriverCapability runs the driver conformance suite over a driver
// that is a driver.ChangeFeed (its ChangeFeed case checks the
// capability's contract), and a relay over it follows the binary log
// with no RelayConfig.ChangeFeed.
func TestDriverCapability(t *testing.T) {
	s := testmariadb.Start(t, "--log-bin=binlog", "--server-id=7")
	admin := testdb.MySQLAt(t, s.URL)
	// Each driver over a database of its own, its feed following that
	// database's table.
	open := func(t *testing.T) feedDriver {
		name := testdb.RandomName("t_")
		if _, err := admin.SQL.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		url := strings.TrimSuffix(s.URL, "/test") + "/" + name
		feed, err := outboxbinlog.OpenURL(url)
		if err != nil {
			t.Fatal(err)
		}
		return feedDriver{testdb.MySQLAt(t, url).Std, feed}
	}
	drivertest.Run(t, func(t *testing.T) driver.Driver[*sql.Tx] { return open(t) })
	d := open(t)
	if _, err := outbox.Migrate(t.Context(), d, nil); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(d, &outbox.RelayConfig{
		Routes: []outbox.Route{{Pattern: "*", Publisher: publisher.Func(func(context.Context, *publisher.Envelope) error { return nil })}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := relaytest.Go(t, "Run", 20*time.Second, r.Run)
	waitWake(t, r, "binlog", &syncbuf.Buffer{})
	stop()
}
