package main_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// TestFailpointsOnlyWithTheBuildTag builds the outbox command twice and
// runs each build's relay with a failpoint that SIGKILLs it as soon as it
// has read its first batch. The ordinary build, the one users install,
// must ignore OUTBOX_FAILPOINTS: it keeps running and delivers every
// message. The build with -tags outbox_failpoints must die of the
// failpoint's SIGKILL with nothing delivered, which shows that the same
// setup does reach the failpoint.
func TestFailpointsOnlyWithTheBuildTag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the outbox command: -short")
	}
	for _, c := range []struct {
		name   string
		tags   string
		killed bool
	}{
		{"default build", "", false},
		{"outbox_failpoints build", "outbox_failpoints", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bin := buildOutbox(t, c.tags)
			db := testdb.New(t, store.SQLite)
			const n = 50
			rows := make([]string, n)
			for i := range rows {
				rows[i] = fmt.Sprintf(`('failpoint.test', 'key-%d', '{"n":%d}')`, i%5, i)
			}
			db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES `+strings.Join(rows, ", "))
			var mu sync.Mutex
			seen := map[string]bool{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				mu.Lock()
				seen[req.Header.Get("webhook-id")] = true
				mu.Unlock()
			}))
			t.Cleanup(srv.Close)
			delivered := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(seen)
			}

			cmd := exec.Command(bin, "relay", "--db", db.URL, "--to", srv.URL+"/hook",
				"--max-poll", "50ms", "--log-level", "warn")
			cmd.Env = append(os.Environ(), "OUTBOX_WEBHOOK_SECRET=failpoint-test-secret",
				"OUTBOX_FAILPOINTS=after_read_before_publish=kill")
			cmd.Stderr = os.Stderr
			relay := testserver.Spawn(t, cmd, "relay")

			if c.killed {
				relaytest.WaitFor(t, time.Minute, "the relay to reach the failpoint", relay.Exited)
				if !relay.KilledBy(syscall.SIGKILL) {
					t.Fatalf("relay ended with %v, not by the failpoint's SIGKILL", relay.State())
				}
				if d := delivered(); d != 0 {
					t.Fatalf("%d messages delivered before a failpoint placed ahead of every publish", d)
				}
				return
			}
			relaytest.WaitFor(t, time.Minute, "every message delivered and sent", func() bool {
				if relay.Exited() {
					t.Fatalf("the relay ended (%v) with OUTBOX_FAILPOINTS set in a build without failpoints", relay.State())
				}
				return delivered() == n && relaytest.Count(t, db, "sent") == n
			})
			relay.Term(t)
		})
	}
}

// buildOutbox builds this command with the build tags tags (none if
// empty) into the test's temporary directory and returns its path.
func buildOutbox(t *testing.T, tags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "outbox")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}
