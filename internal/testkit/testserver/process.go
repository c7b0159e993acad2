package testserver

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// Process is a program running in a child process: a private server, or
// a relay the tests run as an operator would (the outbox command, or the
// test binary re-executed as one).
type Process struct {
	cmd  *exec.Cmd
	what string
	done chan struct{}
}

// Start starts cmd, a server program of the system; what names it in the
// failure message, which says the service is unavailable.
func Start(t testing.TB, cmd *exec.Cmd, what string) *Process {
	t.Helper()
	if err := cmd.Start(); err != nil {
		testdb.Unavailable(t, what, err)
	}
	return watch(cmd, what)
}

// Spawn starts cmd, a program of the tests' own (a command they built, or
// the test binary itself), failing the test if it cannot start; what
// names it in messages. The process is SIGKILLed at cleanup if it still
// runs.
func Spawn(t testing.TB, cmd *exec.Cmd, what string) *Process {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	p := watch(cmd, what)
	t.Cleanup(p.Kill)
	return p
}

func watch(cmd *exec.Cmd, what string) *Process {
	p := &Process{cmd: cmd, what: what, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// State is how the process ended; nil while it runs.
func (p *Process) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// KilledBy reports whether the process has ended by sig.
func (p *Process) KilledBy(sig syscall.Signal) bool {
	ws, ok := p.State().Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Kill SIGKILLs the process and waits for it; a nil or ended process is
// left alone.
func (p *Process) Kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Term stops the process with SIGTERM and checks that it exits 0 within
// 30 s; one that does not is SIGKILLed.
func (p *Process) Term(t testing.TB) {
	t.Helper()
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited with %d after SIGTERM", p.what, code)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not exit within 30s of SIGTERM", p.what)
		p.Kill()
	}
}
