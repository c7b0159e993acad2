package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
)

// scriptedFeed is a driver.ChangeFeed whose Watch calls follow a script:
// the first cannot start, the second follows until lose is closed, the
// third follows until its context ends.
type scriptedFeed struct {
	calls   atomic.Int64
	lose    chan struct{}
	stopped chan struct{}
}

func (f *scriptedFeed) String() string { return "scripted feed" }

func (f *scriptedFeed) Watch(ctx context.Context, table string, changed func()) error {
	if table != "outbox_messages" {
		return errors.New("asked to follow " + table)
	}
	switch f.calls.Add(1) {
	case 1:
		return errors.New("the server keeps no log")
	case 2:
		changed()
		select {
		case <-f.lose:
			return errors.New("connection reset")
		case <-ctx.Done():
			return nil
		}
	default:
		changed()
		<-ctx.Done()
		close(f.stopped)
		return nil
	}
}

// TestRelayChangeFeed: a relay given a change feed over MariaDB (which
// has no LISTEN) says once, at info level, why the feed cannot start and
// probes meanwhile; it tries again, names the feed as its wake-up once
// it follows, says at warning level when it is lost and follows the next
// one; rows written by plain SQL are delivered throughout; Run ends the
// feed's Watch.
func TestRelayChangeFeed(t *testing.T) {
	db := testdb.New(t, store.MySQL)
	feed := &scriptedFeed{lose: make(chan struct{}), stopped: make(chan struct{})}
	got := make(chan string, 10)
	logs := &syncbuf.Buffer{}
	r, err := db.NewRelay(&outbox.RelayConfig{
		Routes: []outbox.Route{{Pattern: "*", Publisher: publisher.Func(func(_ context.Context, env *publisher.Envelope) error {
			got <- string(env.Payload)
			return nil
		})}},
		Logger:          slog.New(slog.NewTextHandler(logs, nil)),
		MaxPollInterval: time.Hour,
		ChangeFeed:      feed,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	finished := make(chan struct{})
	go func() {
		runErr = r.Run(ctx)
		close(finished)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	deliver := func(p string) {
		t.Helper()
		db.Exec(t, "INSERT INTO outbox_messages (topic, payload) VALUES ('order.created', ?)", p)
		select {
		case g := <-got:
			if g != p {
				t.Fatalf("published %s, want %s", g, p)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s not published within 30 s; the log:\n%s", p, logs.String())
		}
	}
	waitWake := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for r.Wake() != want {
			if time.Now().After(deadline) {
				t.Fatalf("wake-up %q after 30 s, want %q; the log:\n%s", r.Wake(), want, logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitWake("scripted feed")
	if n := strings.Count(logs.String(), "cannot follow the scripted feed"); n != 1 || !strings.Contains(logs.String(), "the server keeps no log") || !strings.Contains(logs.String(), "level=INFO msg=\"outbox relay: cannot follow") {
		t.Fatalf("the relay said %d times at info level that it cannot follow the feed, want once with the reason; the log:\n%s", n, logs.String())
	}
	deliver(`{"n":1}`)
	close(feed.lose)
	deadline := time.Now().Add(30 * time.Second)
	for feed.calls.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the feed was not followed again within 30 s of its loss; the log:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitWake("scripted feed")
	if feed.calls.Load() != 3 || !strings.Contains(logs.String(), "level=WARN msg=\"outbox relay: lost the scripted feed") || !strings.Contains(logs.String(), "connection reset") {
		t.Fatalf("after the feed was lost: %d Watch calls, the log:\n%s", feed.calls.Load(), logs.String())
	}
	deliver(`{"n":2}`)
	cancel()
	<-finished
	if runErr != nil {
		t.Fatalf("Run: %v", runErr)
	}
	select {
	case <-feed.stopped:
	default:
		t.Fatal("Run returned while the feed's Watch still ran")
	}
}
