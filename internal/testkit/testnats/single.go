package testnats

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// Server is one nats-server of a test's own with JetStream, on a port of
// the tests' range and a store directory that outlives its restarts, so
// that streams created before a Stop are there after a Start.
type Server struct {
	Port int

	bin, dir string
	proc     *testserver.Process
}

// NewServer reserves a port and a store directory for a server and
// returns it stopped: the port refuses connections until Start.
func NewServer(t testing.TB) *Server {
	t.Helper()
	bin := testserver.Binary(t, "nats-server", "scripts/services.sh runs Debian's package", "/usr/sbin")
	dir, _ := testserver.Dir(t, "outbox-nats-", "", "NATS")
	s := &Server{Port: testserver.FreePort(t), bin: bin, dir: dir}
	t.Cleanup(s.Stop)
	return s
}

// StartServer is NewServer then Start.
func StartServer(t testing.TB) *Server {
	t.Helper()
	s := NewServer(t)
	s.Start(t)
	return s
}

// Start runs the server and waits until it accepts connections.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	s.proc = testserver.Start(t, exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-js", "-sd", s.dir), "nats-server")
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) || s.proc.Exited() {
			s.Stop()
			t.Fatalf("nats-server on %s did not listen: %v", s.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server, if it runs, and waits for it.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// URL is the server's nats:// URL.
func (s *Server) URL() string { return "nats://" + s.Addr() }
