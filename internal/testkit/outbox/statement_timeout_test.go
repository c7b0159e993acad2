package outbox_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
)

// TestRelayMySQLServerStopsAbandonedRead: on MariaDB, a relay read that
// runs past the relay's statement timeout (a keyed backlog held back
// behind a message delayed for an hour, with as many of the key's
// messages scheduled later still: the read walks those once per row held
// back, some ten seconds of work) fails the round, and the server stops
// running it then, instead of working on for the rest of its ten seconds
// while the relay reads again. Once the delayed
// message is released, the relay delivers the whole backlog, each
// message once, none charged an attempt for the failed reads.
func TestRelayMySQLServerStopsAbandonedRead(t *testing.T) {
	h := harness.New(t, harness.Case{Name: "mysql", Dialect: store.MySQL})
	ctx := context.Background()
	const n = 6000
	backlog := msgs(2*n+1, "order.held", func(int) string { return "held" })
	backlog[0].Delay = time.Hour
	for i := n + 1; i < len(backlog); i++ {
		backlog[i].Delay = 2 * time.Hour
	}
	enqueue(t, h, ctx, backlog)

	s := newSink()
	logs := &logCapture{}
	cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(s.publish)})
	cfg.Logger = slog.New(logs)
	relaytest.Run(t, newRelay(t, h, cfg))

	var failed time.Time
	relaytest.WaitFor(t, 15*time.Second, "a read to fail", func() bool {
		for _, r := range logs.records() {
			if r.Level == slog.LevelError && r.Message == "outbox relay: round failed; retrying" {
				failed = r.Time
				return true
			}
		}
		return false
	})
	if got := logs.find(slog.LevelError, "outbox relay: round failed; retrying"); !strings.HasPrefix(got[0]["err"], "read: ") {
		t.Fatalf("the round failed with %q, want a failed read", got[0]["err"])
	}
	// A statement the server started before the round failed is the
	// abandoned read; the relay's next read started after it.
	relaytest.WaitFor(t, 5*time.Second, "no statement started before the read failed", func() bool {
		return h.DB.Count(t, `SELECT count(*) FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO IS NOT NULL AND TIME > ?`, time.Since(failed).Seconds()+2) == 0
	})

	h.DB.Exec(t, "UPDATE outbox_messages SET available_at = NOW(6) WHERE available_at > NOW(6)")
	relaytest.WaitFor(t, time.Minute, "the backlog delivered", func() bool { return relaytest.Count(t, h.DB, "sent") == 2*n+1 })
	if got, total := s.distinct(), s.total(); got != 2*n+1 || total != 2*n+1 {
		t.Errorf("%d deliveries of %d distinct messages, want %d of each", total, got, 2*n+1)
	}
	if c := h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE attempts <> 1"); c != 0 {
		t.Errorf("%d messages were charged for the failed reads", c)
	}
}
