// Package testpg runs PostgreSQL servers of a test's own: a cluster made
// by initdb in a temporary directory on a port of the tests' range
// (internal/testserver), and streaming standbys of it made by
// pg_basebackup, synchronous or not. Servers are stopped and their
// directories removed at cleanup. They never touch the shared service.
package testpg

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// binDirs are where Debian puts PostgreSQL's server programs.
var binDirs = []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"}

// Server is one private PostgreSQL server.
type Server struct {
	// Dir holds the data directory, the log and the socket.
	Dir, Data string
	Port      int
	// Name is the server's cluster_name (a standby's application_name
	// towards its primary).
	Name string

	bin     string
	account testserver.Account
	// settings are extra -c options the server starts with.
	settings []string
}

// URL is the server's database postgres as the superuser, in --db form.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
}

// Addr is host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// Option changes how Start sets a primary up.
type Option func(*Server)

// Setting adds a server setting (name=value) to the primary.
func Setting(kv string) Option { return func(s *Server) { s.settings = append(s.settings, kv) } }

// Start initialises a cluster (trust authentication, superuser postgres)
// and starts it. It is stopped at cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	initdb := testserver.Binary(t, "initdb", "to run a private PostgreSQL", binDirs...)
	bin := filepath.Dir(initdb)
	if resolved, err := filepath.EvalSymlinks(initdb); err == nil {
		bin = filepath.Dir(resolved)
	}
	s := &Server{bin: bin, Name: "primary"}
	s.Dir, s.account = testserver.Dir(t, "outbox-pg-", "postgres", "a private PostgreSQL")
	s.Data = filepath.Join(s.Dir, "data")
	s.Port = testserver.FreePort(t)
	for _, o := range opts {
		o(s)
	}
	s.account.Run(t, filepath.Join(bin, "initdb"), "-D", s.Data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	s.Ctl(t, "start")
	t.Cleanup(func() { s.stopQuietly() })
	return s
}

// Standby makes a streaming standby of s with pg_basebackup -R on a port
// of its own and starts it. With sync set, s waits for it at every commit
// (synchronous_standby_names names it; synchronous_commit stays at its
// default, on: a commit returns once the standby has flushed it).
func (s *Server) Standby(t testing.TB, name string, sync bool) *Server {
	t.Helper()
	sb := &Server{bin: s.bin, Name: name}
	sb.Dir, sb.account = testserver.Dir(t, "outbox-pg-standby-", "postgres", "a private PostgreSQL")
	sb.Data = filepath.Join(sb.Dir, "data")
	sb.Port = testserver.FreePort(t)
	sb.account.Run(t, filepath.Join(s.bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres",
		"-D", sb.Data, "-R", "-X", "stream", "--no-sync", "-c", "fast")
	sb.Ctl(t, "start")
	t.Cleanup(func() { sb.stopQuietly() })
	if sync {
		s.SQL(t, "ALTER SYSTEM SET synchronous_standby_names = '"+name+"'")
		s.SQL(t, "SELECT pg_reload_conf()")
	}
	return sb
}

// SQL runs one statement on the server with psql, failing the test if it
// fails, and returns what it printed on stdout (unaligned, tuples only);
// psql's stderr is in the failure message only.
func (s *Server) SQL(t testing.TB, stmt string) string {
	t.Helper()
	out, err := s.account.Output(filepath.Join(s.bin, "psql"), "-X", "-qAt", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port),
		"-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", stmt)
	if err != nil {
		t.Fatalf("psql on %s: %s: %v\n%s", s.Name, stmt, err, out)
	}
	return strings.TrimSpace(out)
}

// Ctl runs pg_ctl action on the server, waiting for it to finish.
func (s *Server) Ctl(t testing.TB, action string, args ...string) {
	t.Helper()
	s.account.Run(t, filepath.Join(s.bin, "pg_ctl"), s.ctlArgs(action, args...)...)
}

func (s *Server) ctlArgs(action string, args ...string) []string {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 -c cluster_name=%s", s.Port, s.Dir, s.Name)
	for _, kv := range s.settings {
		opts += " -c " + kv
	}
	return append([]string{action, "-D", s.Data, "-w", "-t", "60", "-l", filepath.Join(s.Dir, "log"), "-o", opts}, args...)
}

// stopQuietly stops the server at once, whether it runs or not.
func (s *Server) stopQuietly() {
	_ = s.account.Command(filepath.Join(s.bin, "pg_ctl"), s.ctlArgs("stop", "-m", "immediate")...).Run()
}

// Kill SIGKILLs the server's postmaster and every backend at once, as a
// lost machine ends them: nothing is flushed, no standby is told.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Data, "postmaster.pid"))
	if err != nil {
		t.Fatalf("%s: no postmaster.pid: %v", s.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("%s: postmaster.pid: %v", s.Name, err)
	}
	testserver.KillTree(pid)
	for syscall.Kill(pid, 0) == nil {
		// Wait until the postmaster is gone (a zombie until its parent,
		// init, reaps it).
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Promote turns a standby into a primary (pg_ctl promote, waiting until
// it accepts writes).
func (s *Server) Promote(t testing.TB) { s.Ctl(t, "promote") }
