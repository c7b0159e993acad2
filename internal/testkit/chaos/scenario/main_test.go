package scenario_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// TestMain doubles as a relay process for the scenarios and the crash
// tests: with OUTBOX_TEST_CHILD_DB set, the test binary runs a relay that
// posts every message to OUTBOX_TEST_CHILD_SINK, until it is killed or
// signalled. Built with the tag outbox_failpoints, that relay has the
// failpoints its OUTBOX_FAILPOINTS names.
func TestMain(m *testing.M) {
	if url := os.Getenv("OUTBOX_TEST_CHILD_DB"); url != "" {
		os.Exit(childRelay(url, os.Getenv("OUTBOX_TEST_CHILD_SINK")))
	}
	flag.Parse()
	if testing.Short() {
		// Every test here kills, partitions, freezes or restarts real
		// processes and services.
		fmt.Println("skipped: the fault scenarios do not run under -short")
		os.Exit(0)
	}
	testdb.VerifyNoLeaks(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// childRelay runs a relay over the database at url until SIGTERM or
// SIGINT. An http:// sink receives every message as a POST; any other
// sink (amqp://, kafka://, …) is a destination URL, opened as the outbox
// command opens --to.
func childRelay(url, sink string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := relaytest.Logger()
	if os.Getenv("OUTBOX_TEST_LOG") == "" {
		// Warnings (a lost partition, a fenced settle) explain duplicates.
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	dburl.DriverLogs(logger) // before the database opens, as `outbox relay` does
	db, err := dburl.Open(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer db.Close()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	pub := outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, sink, bytes.NewReader(env.Payload))
		if err != nil {
			return err
		}
		req.Header.Set("webhook-id", env.ID)
		req.Header.Set("outbox-business-key", env.Key)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("sink answered %d", resp.StatusCode)
		}
		return nil
	})
	routes := []outbox.Route{{Pattern: "*", Publisher: pub}}
	if !strings.HasPrefix(sink, "http://") && !strings.HasPrefix(sink, "https://") {
		dest, err := outboxurl.Open(sink, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		defer dest.Close()
		routes[0].Publisher = dest
	}
	// A database read by snapshots needs relays that read so.
	snapshot, err := db.Backend().Store.SnapshotReadEnabled(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	batch, _ := strconv.Atoi(os.Getenv("OUTBOX_TEST_CHILD_BATCH"))
	ttl, _ := time.ParseDuration(os.Getenv("OUTBOX_TEST_CHILD_TTL"))
	cfg := &outbox.RelayConfig{
		Routes:          routes,
		ID:              os.Getenv("OUTBOX_TEST_CHILD_ID"),
		Logger:          logger,
		BatchSize:       batch,
		LeaseTTL:        ttl,
		MaxPollInterval: 50 * time.Millisecond,
		SnapshotRead:    snapshot,
		Retry:           outbox.RetryPolicy{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond},
	}
	r, err := db.NewRelay(cfg)
	if err == nil {
		err = r.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// child is a relay in its own process: this test binary, re-executed
// as childRelay.
type child = testserver.Process

// startChild starts a relay process over dbURL delivering to sinkURL
// (see childRelay), with relay id id, batches of batch and leases of ttl;
// it is killed at cleanup if still running. Failpoints are off in it
// unless env (extra NAME=value variables, which win over the test's own
// environment) sets OUTBOX_FAILPOINTS.
func startChild(t *testing.T, dbURL, sinkURL, id string, batch int, ttl time.Duration, env ...string) *child {
	t.Helper()
	cmd := childCommand(dbURL, sinkURL, id, batch, ttl)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return testserver.Spawn(t, cmd, "relay")
}

// childCommand is the command of a child relay (see startChild), with
// failpoints off.
func childCommand(dbURL, sinkURL, id string, batch int, ttl time.Duration) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"OUTBOX_FAILPOINTS=",
		"OUTBOX_TEST_CHILD_DB="+dbURL,
		"OUTBOX_TEST_CHILD_SINK="+sinkURL,
		"OUTBOX_TEST_CHILD_ID="+id,
		fmt.Sprintf("OUTBOX_TEST_CHILD_BATCH=%d", batch),
		"OUTBOX_TEST_CHILD_TTL="+ttl.String(),
	)
	return cmd
}

// assertRunning fails the test if the relay process c has ended; what
// says when it should not have.
func assertRunning(t *testing.T, c *child, what string) {
	t.Helper()
	if c.Exited() {
		t.Fatalf("the relay process ended (%v) %s", c.State(), what)
	}
}
