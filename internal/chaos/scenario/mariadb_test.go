package scenario_test

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

	_ "github.com/go-sql-driver/mysql" // the private server's readiness check

	"github.com/txoutbox/outbox/internal/harness"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/internal/testserver"
)

// TestChaosMariaDBRestart is TestChaosDatabaseRestart on MariaDB: a
// private server on a spare port is SIGKILLed and started again on the
// same data directory under a relay process and writers. Once it is back,
// everything committed arrives and no row is falsely sent. Commits cut by
// a kill are uncertain.
func TestChaosMariaDBRestart(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	my := startPrivateMariaDB(t)
	saved := testdb.MySQLURL
	testdb.MySQLURL = my.url
	dc := chaosDrivers[1]
	h := harness.New(t, dc)
	testdb.MySQLURL = saved

	restartUnderLoad(t, h, dc, rnd, 2*scale, "database SIGKILLed and restarted", "restarts (SIGKILL)", func() {
		my.kill(t)
		my.start(t)
	})
}

// privateMariaDB is a MariaDB server of the test's own.
type privateMariaDB struct {
	dir, data, url string
	server         string // mariadbd
	port           int
	runAs          string // the user the server switches to when started as root
	proc           *testserver.Process
}

// startPrivateMariaDB initialises a data directory in a temporary
// directory and starts a server on it, on a free port, killed and removed
// at cleanup. The server refuses to run as root, so it switches to the
// mysql user then. It skips the grant tables: root, or anyone, connects
// over TCP without a password.
func startPrivateMariaDB(t *testing.T) *privateMariaDB {
	t.Helper()
	install, err := lookBinary("mariadb-install-db", "mysql_install_db")
	if err != nil {
		testdb.Unavailable(t, "mariadb-install-db (to run a private MariaDB)", err)
	}
	server, err := lookBinary("mariadbd", "mysqld")
	if err != nil {
		testdb.Unavailable(t, "mariadbd (to run a private MariaDB)", err)
	}
	my := &privateMariaDB{server: server}
	var account testserver.Account
	my.dir, account = testserver.Dir(t, "outbox-chaos-mariadb-", "mysql", "a private MariaDB")
	my.runAs = account.Name
	my.data = filepath.Join(my.dir, "data")
	args := []string{"--no-defaults", "--datadir=" + my.data, "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}
	if my.runAs != "" {
		args = append(args, "--user="+my.runAs)
	}
	// In the server's own directory: the server drops to the mysql
	// account, which may not be able to enter the test's working
	// directory.
	installCmd := exec.Command(install, args...)
	installCmd.Dir = my.dir
	if out, err := installCmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", install, strings.Join(args, " "), err, out)
	}
	my.port = testserver.FreePort(t)
	t.Cleanup(func() { my.proc.Kill() })
	my.start(t)
	admin, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", my.port))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE IF NOT EXISTS test"); err != nil {
		t.Fatal(err)
	}
	my.url = fmt.Sprintf("mysql://root@127.0.0.1:%d/test", my.port)
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

// start runs the server on its data directory and port and waits until
// it answers over TCP. InnoDB writes its log to the operating system at
// every commit and flushes it to disk once a second
// (innodb_flush_log_at_trx_commit=2): a SIGKILL of the server loses no
// committed transaction, since the log is in the page cache, which the
// process's death does not touch (only an operating system crash could
// lose the last second, and the test kills processes, not the machine).
func (my *privateMariaDB) start(t *testing.T) {
	t.Helper()
	args := []string{"--no-defaults",
		"--datadir=" + my.data,
		"--port=" + strconv.Itoa(my.port),
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
	cmd := exec.Command(my.server, args...)
	cmd.Dir = my.dir
	my.proc = testserver.Start(t, cmd, "a private MariaDB")

	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=1s", my.port))
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
			t.Fatalf("private MariaDB not answering on port %d after a minute: %v\n%s", my.port, err, my.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL: nothing is flushed, InnoDB recovers
// from its log at the next start.
func (my *privateMariaDB) kill(t *testing.T) {
	t.Helper()
	if my.proc.Exited() {
		t.Fatalf("private MariaDB had exited (%v) before the kill:\n%s", my.proc.State(), my.logTail())
	}
	my.proc.Kill()
	my.proc = nil
}

// logTail is the end of the server's error log.
func (my *privateMariaDB) logTail() string {
	b, _ := os.ReadFile(filepath.Join(my.dir, "error.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
