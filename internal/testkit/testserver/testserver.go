// Package testserver holds what the tests' private servers share
// (PostgreSQL clusters, PgBouncer, NATS clusters, MariaDB): a directory of
// their own, a port of the tests' range, and the system account to run
// them as when the tests run as root.
package testserver

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// Ports is the range private servers listen in: OUTBOX_TEST_PORTS
// ("FROM-TO"), 16000–16999 by default.
func Ports() (from, to int) {
	from, to = 16000, 16999
	if v := os.Getenv("OUTBOX_TEST_PORTS"); v != "" {
		a, b, ok := strings.Cut(v, "-")
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		if ok && err1 == nil && err2 == nil && x > 0 && y >= x {
			return x, y
		}
	}
	return from, to
}

// FreePort is a port of Ports nobody listens on at the moment, picked at
// random so that tests running at once rarely try the same one.
func FreePort(t testing.TB) int {
	t.Helper()
	from, to := Ports()
	start := rand.IntN(to - from + 1)
	for i := range to - from + 1 {
		p := from + (start+i)%(to-from+1)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = ln.Close()
		return p
	}
	t.Fatalf("no free port in %d-%d (OUTBOX_TEST_PORTS)", from, to)
	return 0
}

// Account is the system user a server runs as: none (the test's own) when
// the test is not root; otherwise name, since PostgreSQL, PgBouncer and
// MariaDB refuse to run as root.
type Account struct {
	Name     string // "" for the test's own user
	UID, GID int
}

// Dir makes a directory for a private server, removed at cleanup, owned
// by the account the server runs as (see Account; "" for a server that
// runs as root too); what names the server in the message when that
// account is missing.
func Dir(t testing.TB, prefix, account, what string) (string, Account) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() != 0 || account == "" {
		return dir, Account{}
	}
	u, err := user.Lookup(account)
	if err != nil {
		testdb.Unavailable(t, "a "+account+" user to run "+what+" as", err)
	}
	a := Account{Name: account}
	a.UID, _ = strconv.Atoi(u.Uid)
	a.GID, _ = strconv.Atoi(u.Gid)
	if err := os.Chown(dir, a.UID, a.GID); err != nil {
		t.Fatal(err)
	}
	return dir, a
}

// Command is name with args, to be run as a. Run as another account, it
// starts in the root directory: the test's working directory (a clone in
// a private home or a mktemp directory) may be one that account cannot
// enter, and programs such as psql say so on stderr.
func (a Account) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	if a.Name != "" {
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID)}}
	}
	return cmd
}

// Run runs name with args as a and fails the test with its output if it
// fails.
func (a Account) Run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := a.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// Output runs name with args as a and returns what it printed on stdout.
// Its stderr is never part of the result: when it fails, the error
// carries it; when it succeeds, warnings there are dropped.
func (a Account) Output(name string, args ...string) (string, error) {
	cmd := a.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", filepath.Base(name), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Binary is the path of a server program: on PATH, or in one of dirs;
// what names it for the message when it is nowhere (the test fails under
// CI=true, skips otherwise).
func Binary(t testing.TB, name, what string, dirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	testdb.Unavailable(t, name+" ("+what+")", exec.ErrNotFound)
	return ""
}

// KillTree SIGKILLs pid and its children at once, as a machine that loses
// power ends them: none of them gets to act on the others' death.
func KillTree(pid int) {
	kids := children(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
}

// children are the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so parse after ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// Chromium is the browser the page tests drive: $CHROME_PATH, else
// chromium (or a Chrome) on PATH. Without one the test fails under
// CI=true and skips elsewhere; scripts/chromium.sh installs one.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROME_PATH"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CHROME_PATH=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testdb.Unavailable(t, "Chromium (set CHROME_PATH or put chromium on PATH; scripts/chromium.sh installs it)", exec.ErrNotFound)
	return ""
}

// ChromiumLog is the last n lines of a browser's output, without its
// complaints about the missing D-Bus.
func ChromiumLog(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if !strings.Contains(l, "dbus") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
