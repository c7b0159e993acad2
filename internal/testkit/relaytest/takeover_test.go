package relaytest_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestTakeoverSuspectsSettle: a relay that takes over partitions whose
// previous owner stopped mid-round treats the rows up to the in-flight
// marks as suspects (published alone at first), delivers everything, and
// once no suspect is pending says so and stops isolating.
func TestTakeoverSuspectsSettle(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload)
		SELECT 'order.created', 'k' || (g % 5), '{}' FROM generate_series(1, 20) AS g`)
	// As a relay killed after reading every row leaves its leases.
	db.Exec(t, `UPDATE outbox_leases SET owner = 'gone', expires_at = now() - interval '1 second',
		inflight_max_id = (SELECT max(id) FROM outbox_messages)`)
	logs := &syncbuf.Buffer{}
	cfg := relaytest.Config(outbox.PublisherFunc(func(context.Context, *outbox.Envelope) error { return nil }))
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	relaytest.Start(t, db, cfg)
	relaytest.WaitFor(t, 30*time.Second, "every row sent", func() bool { return relaytest.Count(t, db, "sent") == 20 })
	if !strings.Contains(logs.String(), "publishing alone a message that was in flight") {
		t.Fatalf("no suspect was isolated:\n%s", logs.String())
	}
	relaytest.WaitFor(t, 10*time.Second, "the suspects declared settled", func() bool {
		return strings.Contains(logs.String(), "the messages in flight when a relay stopped are settled")
	})
}
