package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testpgbouncer"
)

// TestThroughPgBouncer runs the commands through Debian's PgBouncer in
// transaction mode, configured with nothing but that pool mode (no
// ignore_startup_parameters, no prepared statements): migrate refuses
// with one line and succeeds against the server itself; enqueue, relay
// and status work through the pooler with the URL as it is; the relay
// says once that LISTEN cannot work there and delivers by polling.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	name := testdb.PostgresDatabase(t)
	direct := map[string]string{"OUTBOX_DATABASE_URL": testdb.WithDatabase(testdb.PostgresURL, name)}
	b := testpgbouncer.Start(t, "127.0.0.1:5432")
	via := map[string]string{"OUTBOX_DATABASE_URL": b.URL(name)}

	r := run(t, via, "migrate")
	r.failed(t, ExitUsage, "connection pooler (PgBouncer)", "against the PostgreSQL server itself")
	if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("migrate through PgBouncer: want one line, got %q", r.stderr)
	}
	run(t, direct, "migrate").ok(t)

	first := enqueueOK(t, via, "--topic", "order.created", "--key", "o-1", "--payload", `{"n":1}`)
	var stdout, stderr syncbuf.Buffer
	stop := startRelay(t, via, &stdout, &stderr, "--to", "stdout://", "--lease-ttl", "2s")
	waitFor(t, "the first message on stdout", func() bool { return strings.Contains(stdout.String(), first) })
	const warning = "LISTEN cannot work over this database connection"
	waitFor(t, "the relay's LISTEN warning", func() bool { return strings.Contains(stderr.String(), warning) })
	second := enqueueOK(t, via, "--topic", "order.created", "--key", "o-1", "--payload", `{"n":2}`)
	waitFor(t, "the second message on stdout", func() bool { return strings.Contains(stdout.String(), second) })
	// A round's outcomes may be written with the next read, a poll
	// interval after the message reached stdout.
	waitFor(t, "status through PgBouncer: 2 sent, 0 pending", func() bool {
		st := status(t, via)
		return st.Sent == 2 && st.Pending == 0
	})
	if code := stop(); code != 0 {
		t.Fatalf("relay exited %d\n%s", code, stderr.String())
	}
	if n := strings.Count(stderr.String(), warning); n != 1 {
		t.Errorf("the LISTEN warning was logged %d times, want once:\n%s", n, stderr.String())
	}
	for _, bad := range []string{"unsupported startup parameter", "prepared statement"} {
		if strings.Contains(stderr.String(), bad) {
			t.Errorf("relay log mentions %q:\n%s", bad, stderr.String())
		}
	}

	// --listen-db takes the LISTEN connection straight to the server; it
	// refuses a URL that leads to the pooler.
	run(t, via, "relay", "--to", "stdout://", "--listen-db", b.URL(name)).failed(t, ExitUsage, "--listen-db must lead to the PostgreSQL server itself")
	stdout, stderr = syncbuf.Buffer{}, syncbuf.Buffer{}
	stop = startRelay(t, via, &stdout, &stderr, "--to", "stdout://", "--lease-ttl", "2s", "--listen-db", direct["OUTBOX_DATABASE_URL"])
	third := enqueueOK(t, via, "--topic", "order.created", "--key", "o-1", "--payload", `{"n":3}`)
	waitFor(t, "the third message on stdout", func() bool { return strings.Contains(stdout.String(), third) })
	// The listener's check takes at most 5 s; a relay that failed it
	// would have said so by now.
	time.Sleep(6 * time.Second)
	if code := stop(); code != 0 {
		t.Fatalf("relay with --listen-db exited %d\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), warning) {
		t.Errorf("with --listen-db straight to the server the relay still warns:\n%s", stderr.String())
	}
}
