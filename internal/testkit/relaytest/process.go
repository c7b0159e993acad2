package relaytest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// Process is an `outbox relay` process, run as an operator would run it.
type Process struct {
	p   *testserver.Process
	log *syncbuf.Buffer
	bin string
	db  string
}

// StartRelay builds the outbox command and runs `outbox relay --db dbURL
// args…` with its log at info level; the process is killed at cleanup if
// it still runs.
func StartRelay(t *testing.T, dbURL string, args ...string) *Process {
	t.Helper()
	p := StartRelayArgs(t, append([]string{"--db", dbURL}, args...)...)
	p.db = dbURL
	return p
}

// StartRelayArgs runs `outbox relay args…` with its log at info level,
// for relays whose databases the arguments give otherwise (several --db,
// --db-file); the process is killed at cleanup if it still runs.
func StartRelayArgs(t *testing.T, args ...string) *Process {
	t.Helper()
	bin := relayBinary(t)
	log := &syncbuf.Buffer{}
	cmd := exec.Command(bin, append([]string{"relay", "--log-level", "info"}, args...)...)
	cmd.Stderr = log
	p := testserver.Spawn(t, cmd, "relay")
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("relay log:\n%s", log.String())
		}
	})
	return &Process{p: p, log: log, bin: bin}
}

// Bin is the outbox command the relay runs, for other commands of a test.
func (p *Process) Bin() string { return p.bin }

// Log is what the relay logged so far.
func (p *Process) Log() string { return p.log.String() }

// Logged counts the log lines holding s.
func (p *Process) Logged(s string) int {
	n := 0
	for line := range strings.Lines(p.Log()) {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// Stop ends the relay with SIGTERM and checks it exits 0.
func (p *Process) Stop(t *testing.T) {
	t.Helper()
	p.p.Term(t)
}

// Status runs `outbox status --json` on the relay's database and decodes
// its output into v.
func (p *Process) Status(t *testing.T, v any, args ...string) {
	t.Helper()
	cmd := exec.Command(p.bin, append([]string{"status", "--json", "--db", p.db}, args...)...)
	cmd.Env = os.Environ()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("outbox status --json: %v", err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("outbox status --json: %v\n%s", err, out)
	}
}

// PeakRSS is the most resident memory the relay process has used so far,
// in bytes (VmHWM in /proc; Linux only).
func (p *Process) PeakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", p.p.Pid())
	return 0
}

// Kill ends the relay with SIGKILL, as a crash would, and waits for it.
func (p *Process) Kill() { p.p.Kill() }

// KeepBinary builds the outbox command StartRelay runs and keeps it until
// t ends, so that the subtests of t that start relays one after another
// share one build.
func KeepBinary(t *testing.T) { relayBinary(t) }
