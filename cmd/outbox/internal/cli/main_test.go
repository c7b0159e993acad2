package cli

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMain doubles as the outbox binary: with OUTBOX_CLI_TEST_CHILD=1 the
// test binary runs Main on its arguments, so tests can signal a real
// process.
func TestMain(m *testing.M) {
	if os.Getenv("OUTBOX_CLI_TEST_CHILD") == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	testdb.VerifyNoLeaks(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// TestRelaySignals: SIGTERM and SIGINT stop a relay process, which exits 0
// after delivering what it had.
func TestRelaySignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, store.SQLite)
			id := enqueueOK(t, dbVars(db), "--topic", "order.created", "--payload", "{}")
			if stderr := relayUntilDelivered(t, db, id, sig); !strings.Contains(stderr, "outbox relay: stopped") {
				t.Errorf("stderr: %s", stderr)
			}
		})
	}
}

// relayUntilDelivered runs `outbox relay --to stdout://` (and args) as a
// process over db until message id is on its stdout, then stops it with
// sig and returns its stderr; it fails the test unless the relay exits 0
// within 30 s.
func relayUntilDelivered(t *testing.T, db *testdb.DB, id string, sig os.Signal, args ...string) string {
	t.Helper()
	var stdout, stderr syncbuf.Buffer
	cmd := exec.Command(os.Args[0], append([]string{"relay", "--to", "stdout://"}, args...)...)
	cmd.Env = append(os.Environ(), "OUTBOX_CLI_TEST_CHILD=1", "OUTBOX_DATABASE_URL="+db.URL)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message on stdout", func() bool { return strings.Contains(stdout.String(), id) })
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("relay: %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("relay did not stop on %v\nstderr: %s", sig, stderr.String())
	}
	return stderr.String()
}
