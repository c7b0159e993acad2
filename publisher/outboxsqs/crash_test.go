package outboxsqs_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/brokertest"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// quiet is the consumers' logger: a relay killed mid-batch makes
// duplicates and retries that are not news.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// relayEnv is what the relay process needs to reach the local server:
// the SDK's default chain finds these credentials, which it accepts.
var relayEnv = []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_PROFILE=", "AWS_EC2_METADATA_DISABLED=true"}

// crashTarget is the local server as the crash test uses it: each
// destination is a fresh queue (FIFO when fifo is set) named as the
// messages' topic, which the relay's sqs:// URL without a queue resolves
// by name, and read by Consume.
func crashTarget(fifo bool) func(t *testing.T) *brokertest.Target {
	return func(t *testing.T) *brokertest.Target {
		c := client(t)
		var mu sync.Mutex
		urls := map[string]string{}
		return &brokertest.Target{
			Target: publishertest.Target{
				NewDestination: func(t *testing.T) string {
					name := randomName("outboxcrash-")
					if fifo {
						name += ".fifo"
					}
					u := createQueue(t, c, name, nil)
					mu.Lock()
					urls[name] = u
					mu.Unlock()
					return name
				},
			},
			Consume: func(t *testing.T, dest string, h brokertest.Handler) {
				mu.Lock()
				u := urls[dest]
				mu.Unlock()
				relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error {
					return outboxsqs.Consume(ctx, c, u, h, &outboxsqs.ConsumeOptions{WaitTime: time.Second, VisibilityTimeout: 5 * time.Second, Logger: quiet})
				})
			},
			URL: "sqs://?region=" + region + "&endpoint=" + endpoint,
		}
	}
}

// TestCrashEndToEnd: rows inserted with plain SQL reach a standard queue
// through an `outbox relay` process killed three times mid-stream, and
// Consume applies each exactly once through an inbox (brokertest.RunCrash).
func TestCrashEndToEnd(t *testing.T) {
	for _, kv := range relayEnv {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // the relay process inherits the environment
	}
	brokertest.RunCrash(t, crashTarget(false))
}

// TestCrashEndToEndFIFO: the same on a FIFO queue, with the messages
// over 20 business keys (message groups): each message is applied
// exactly once, and each key's messages are first applied in the order
// they were committed, across the kills — with the outbox on PostgreSQL,
// MariaDB and SQLite.
func TestCrashEndToEndFIFO(t *testing.T) {
	t.Parallel()
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			tg := crashTarget(true)(t)
			topic := tg.NewDestination(t)
			c := relaytest.NewCrash(t, testdb.New(t, d), topic)
			c.Keys = 20
			tg.Consume(t, topic, c.Handle)
			c.Run(tg.URL, relayEnv...)
		})
	}
}
