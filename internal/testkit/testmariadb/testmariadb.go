// Package testmariadb runs MariaDB servers of a test's own, on a port of
// the tests' range (internal/testserver), with the server options the
// test asks for (a binary log, …). They never touch the shared service.
package testmariadb

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the server's readiness check

	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// Server is a MariaDB server of the test's own.
type Server struct {
	// URL is its database test as root, in --db form; Port is its port.
	URL  string
	Port int

	dir, data string
	server    string   // mariadbd
	args      []string // extra server options
	runAs     string   // the user the server switches to when started as root
	proc      *testserver.Process
}

// Start initialises a data directory in a temporary directory and starts
// a server on it, on a free port, with the server options args
// (--log-bin=binlog, …), killed and removed at cleanup. The server
// refuses to run as root, so it switches to the mysql user then. It
// skips the grant tables: root, or anyone, connects over TCP without a
// password. Its database test exists.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	install, err := lookBinary("mariadb-install-db", "mysql_install_db")
	if err != nil {
		testdb.Unavailable(t, "mariadb-install-db (to run a private MariaDB)", err)
	}
	server, err := lookBinary("mariadbd", "mysqld")
	if err != nil {
		testdb.Unavailable(t, "mariadbd (to run a private MariaDB)", err)
	}
	my := &Server{server: server, args: args}
	var account testserver.Account
	my.dir, account = testserver.Dir(t, "outbox-mariadb-", "mysql", "a private MariaDB")
	my.runAs = account.Name
	my.data = filepath.Join(my.dir, "data")
	iargs := []string{"--no-defaults", "--datadir=" + my.data, "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}
	if my.runAs != "" {
		iargs = append(iargs, "--user="+my.runAs)
	}
	// In the server's own directory: the server drops to the mysql
	// account, which may not be able to enter the test's working
	// directory.
	installCmd := exec.Command(install, iargs...)
	installCmd.Dir = my.dir
	if out, err := installCmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", install, strings.Join(iargs, " "), err, out)
	}
	my.Port = testserver.FreePort(t)
	t.Cleanup(func() {
		if my.proc != nil {
			my.proc.Kill()
		}
	})
	my.Restart(t)
	admin, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", my.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE IF NOT EXISTS test"); err != nil {
		t.Fatal(err)
	}
	my.URL = fmt.Sprintf("mysql://root@127.0.0.1:%d/test", my.Port)
	return my
}

// lookBinary finds the first of names on PATH or in the sbin directories
// (servers live there, which a user's PATH may lack).
func lookBinary(names ...string) (string, error) {
	var errs []error
	for _, name := range names {
		path, err := exec.LookPath(name)
		if err == nil {
			return path, nil
		}
		errs = append(errs, err)
		for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"} {
			if path, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
				return path, nil
			}
		}
	}
	return "", errors.Join(errs...)
}

// Restart runs the server (again, after Kill) on its data directory and
// port and waits until it answers over TCP. InnoDB writes its log to the operating system at
// every commit and flushes it to disk once a second
// (innodb_flush_log_at_trx_commit=2): a SIGKILL of the server loses no
// committed transaction, since the log is in the page cache, which the
// process's death does not touch (only an operating system crash could
// lose the last second, and the test kills processes, not the machine).
func (my *Server) Restart(t testing.TB) {
	t.Helper()
	args := []string{"--no-defaults",
		"--datadir=" + my.data,
		"--port=" + strconv.Itoa(my.Port),
		"--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(my.dir, "mariadb.sock"),
		"--pid-file=" + filepath.Join(my.dir, "mariadb.pid"),
		"--log-error=" + filepath.Join(my.dir, "error.log"),
		"--skip-name-resolve",
		"--skip-grant-tables",
		"--max-connections=200",
		"--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=16M",
		"--innodb-flush-log-at-trx-commit=2",
	}
	if my.runAs != "" {
		args = append(args, "--user="+my.runAs)
	}
	args = append(args, my.args...)
	cmd := exec.Command(my.server, args...)
	cmd.Dir = my.dir
	my.proc = testserver.Start(t, cmd, "a private MariaDB")

	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=1s", my.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		err := db.Ping()
		if err == nil {
			return
		}
		if my.proc.Exited() {
			t.Fatalf("private MariaDB exited (%v) while starting:\n%s", my.proc.State(), my.logTail())
		}
		if time.Now().After(deadline) {
			t.Fatalf("private MariaDB not answering on port %d after a minute: %v\n%s", my.Port, err, my.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill ends the server with SIGKILL: nothing is flushed, InnoDB recovers
// from its log at the next start.
func (my *Server) Kill(t testing.TB) {
	t.Helper()
	if my.proc.Exited() {
		t.Fatalf("private MariaDB had exited (%v) before the kill:\n%s", my.proc.State(), my.logTail())
	}
	my.proc.Kill()
	my.proc = nil
}

// logTail is the end of the server's error log.
func (my *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(my.dir, "error.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
