package faultproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/faultproxy"
)

func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					_, _ = c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestProxyModes(t *testing.T) {
	p, err := faultproxy.New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := roundTrip(c, "hello", 5*time.Second); err != nil || got != "hello\n" {
		t.Fatalf("pass: %q %v", got, err)
	}
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
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "back", 5*time.Second); err != nil || got != "back\n" {
		t.Fatalf("restored: %q %v", got, err)
	}
}
