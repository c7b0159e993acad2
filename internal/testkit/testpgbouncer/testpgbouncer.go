// Package testpgbouncer runs a PgBouncer of a test's own (Debian's
// package, scripts/services.sh installs it) in transaction pooling mode
// in front of a PostgreSQL server, on a port of the tests' range
// (internal/testserver). Apart from the pool mode and what a private
// instance needs (port, directory, trust authentication), the
// configuration is PgBouncer's default: no ignore_startup_parameters, no
// prepared statement support.
package testpgbouncer

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// Bouncer is a running PgBouncer.
type Bouncer struct {
	Port int
	// Upstream is the server's host:port.
	Upstream string

	dir     string
	account testserver.Account
	proc    *testserver.Process
}

// Start runs PgBouncer in front of the PostgreSQL server at upstream
// (host:port): every database name is passed through to it, as user
// postgres. It is killed at cleanup.
func Start(t testing.TB, upstream string) *Bouncer {
	t.Helper()
	b := &Bouncer{Upstream: upstream}
	b.dir, b.account = testserver.Dir(t, "outbox-pgbouncer-", "postgres", "PgBouncer")
	b.Port = testserver.FreePort(t)
	host, port, err := net.SplitHostPort(upstream)
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir = %s
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
logfile = %s
`, host, port, b.Port, b.dir, filepath.Join(b.dir, "users.txt"), filepath.Join(b.dir, "log"))
	b.write(t, "users.txt", `"postgres" ""`+"\n")
	b.write(t, "pgbouncer.ini", conf)
	b.start(t)
	t.Cleanup(b.Kill)
	return b
}

func (b *Bouncer) write(t testing.TB, name, text string) {
	t.Helper()
	p := filepath.Join(b.dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if b.account.Name != "" {
		_ = os.Chown(p, b.account.UID, b.account.GID)
	}
}

// start runs the PgBouncer process in the foreground of a child and
// waits until it accepts connections.
func (b *Bouncer) start(t testing.TB) {
	t.Helper()
	bin := testserver.Binary(t, "pgbouncer", "scripts/services.sh installs Debian's package", "/usr/sbin")
	b.proc = testserver.Start(t, b.account.Command(bin, filepath.Join(b.dir, "pgbouncer.ini")), "pgbouncer")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", b.Addr(), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-b.proc.Done():
			log, _ := os.ReadFile(filepath.Join(b.dir, "log"))
			t.Fatalf("pgbouncer exited at start:\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("pgbouncer not listening on %s after 30 s", b.Addr())
}

// Addr is PgBouncer's host:port.
func (b *Bouncer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", b.Port) }

// URL is database db through PgBouncer as user postgres, in --db form.
func (b *Bouncer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", b.Addr(), db)
}

// Kill SIGKILLs PgBouncer and waits for it: every client connection and
// every server connection it held breaks.
func (b *Bouncer) Kill() { b.proc.Kill() }

// Restart starts PgBouncer again, on the same port, after Kill.
func (b *Bouncer) Restart(t testing.TB) {
	t.Helper()
	b.start(t)
}
