package outboxpubsub_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxpubsub"
)

// TestCrashEndToEnd: rows inserted with plain SQL over 20 business keys
// reach a topic of a Pub/Sub server (pstest, served on a loopback TCP
// port so that another process can reach it) through an `outbox relay`
// process killed three times mid-stream (pubsub://PROJECT?endpoint=…:
// the messages' topic names the Pub/Sub topic, their keys are ordering
// keys), and Consume, on a subscription with message ordering, applies
// each exactly once through an inbox; each key's messages are first
// applied in the order they were committed, across the kills. This is
// brokertest.RunCrash with relaytest.Crash.Keys set.
func TestCrashEndToEnd(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("outboxcrash-"))
	sub := createSubscription(t, c, topic, true)
	crash := relaytest.NewCrash(t, testdb.New(t, store.Postgres), topic)
	crash.Keys = 20
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	relaytest.Go(t, "Consume", 30*time.Second, func(ctx context.Context) error {
		return outboxpubsub.Consume(ctx, sub, crash.Handle, &outboxpubsub.ConsumeOptions{Logger: quiet})
	})
	crash.Run("pubsub://" + project + "?endpoint=" + srv.Addr)
}
