package faultproxy_test

import (
	"bufio"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestProxyModes(t *testing.T) {
	p, _ := newProxy(t)
	c := dial(t, p)
	echoes(t, c, "hello")
	p.SetMode(faultproxy.Blackhole)
	if _, err := roundTrip(c, "lost", 300*time.Millisecond); err == nil {
		t.Fatal("blackholed connection answered")
	}
	p.SetMode(faultproxy.Refuse)
	if _, err := roundTrip(c, "cut", 2*time.Second); err == nil {
		t.Fatal("connection survived Refuse")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if _, err := roundTrip(c2, "new", 2*time.Second); err == nil {
			t.Fatal("a new connection worked while refusing")
		}
		c2.Close()
	}
	p.SetMode(faultproxy.Pass)
	echoes(t, dial(t, p), "back")
}

// recordingEcho is an echo server that also reports every line it
// receives on the returned channel.
func recordingEcho(t *testing.T) (string, <-chan string) {
	lines := make(chan string, 100)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testserver.Serve(t, ln, func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines <- line
			_, _ = c.Write([]byte(line))
		}
	})
	return ln.Addr().String(), lines
}

// newProxy starts a proxy in front of a recording echo server, closed at
// the end of the test, and returns it with the server's channel of lines.
func newProxy(t *testing.T) (*faultproxy.Proxy, <-chan string) {
	t.Helper()
	addr, lines := recordingEcho(t)
	p := faultproxy.Start(t, addr)
	return p, lines
}

// echoes fails the test unless msg comes back through c.
func echoes(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if got, err := roundTrip(c, msg, 5*time.Second); err != nil || got != msg+"\n" {
		t.Fatalf("%s: %q %v", msg, got, err)
	}
}

func dial(t *testing.T, p *faultproxy.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestReset(t *testing.T) {
	p, _ := newProxy(t)
	c := dial(t, p)
	echoes(t, c, "hi")
	p.SetMode(faultproxy.Reset)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("open connection: read %v, want a reset", err)
	}
	// A new connection is reset at once: at connect, or at first use.
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		defer c2.Close()
		_, err = roundTrip(c2, "new", 5*time.Second)
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("new connection: %v, want a reset", err)
	}
	p.SetMode(faultproxy.Pass)
	echoes(t, dial(t, p), "back")
}

func TestDropDiscards(t *testing.T) {
	p, lines := newProxy(t)
	c := dial(t, p)
	p.SetMode(faultproxy.Drop)
	if _, err := roundTrip(c, "dropped", 300*time.Millisecond); err == nil {
		t.Fatal("a dropped line was answered")
	}
	// A new connection is accepted, and its bytes vanish too.
	if _, err := roundTrip(dial(t, p), "also dropped", 300*time.Millisecond); err == nil {
		t.Fatal("a new connection was answered while dropping")
	}
	p.SetMode(faultproxy.Pass)
	c2 := dial(t, p)
	echoes(t, c2, "after")
	// Unlike Blackhole, nothing held comes through afterwards.
	if got := <-lines; got != "after\n" {
		t.Fatalf("the server received %q first: dropped bytes arrived", got)
	}
}

func TestHalfOpenForwardsRequestsDropsReplies(t *testing.T) {
	p, lines := newProxy(t)
	c := dial(t, p)
	p.SetMode(faultproxy.HalfOpen)
	if _, err := roundTrip(c, "request", 300*time.Millisecond); err == nil {
		t.Fatal("a reply came back through a half-open path")
	}
	select {
	case got := <-lines:
		if got != "request\n" {
			t.Fatalf("server got %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request never reached the server")
	}
	p.SetMode(faultproxy.Pass)
	echoes(t, dial(t, p), "whole")
}

func TestDelayHoldsEachChunk(t *testing.T) {
	p, _ := newProxy(t)
	p.SetDelay(400 * time.Millisecond)
	c := dial(t, p)
	// A reply needs two delayed hops; a short deadline expires first.
	if _, err := roundTrip(c, "slow", 200*time.Millisecond); err == nil {
		t.Fatal("answered before the delay")
	}
	p.SetDelay(0)
	c2 := dial(t, p)
	echoes(t, c2, "fast")
}
