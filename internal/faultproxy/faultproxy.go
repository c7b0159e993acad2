// Package faultproxy is a TCP proxy for tests that puts faults between a
// client and a real server: cut every connection and refuse new ones
// (with a FIN or a reset), hold or drop everything, let requests through
// while dropping the replies (a half-open path), delay, and restore.
package faultproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Mode is what the proxy does with traffic.
type Mode int

// Modes.
const (
	// Pass forwards traffic.
	Pass Mode = iota
	// Refuse closes every connection and closes new ones at once.
	Refuse
	// Blackhole keeps connections open but forwards nothing, either way:
	// bytes are held and go through once the mode is Pass again.
	Blackhole
	// Drop keeps connections open and accepts new ones, and discards
	// every byte either way: nothing sent meanwhile ever arrives.
	Drop
	// Reset aborts every connection with a TCP reset (RST) and resets new
	// ones at once.
	Reset
	// HalfOpen forwards what clients send and discards what servers
	// answer: requests arrive, their confirmations never come back.
	HalfOpen
)

// Proxy forwards a local port to a target address.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	mode  Mode
	delay time.Duration
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// New starts a proxy on a free loopback port in front of target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Start is New for one test: an error fails t, and the proxy closes when
// t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Disconnect refuses every connection, open or new, until the function
// it returns puts the proxy back to Pass: the form of a conformance
// target's Disconnect.
func (p *Proxy) Disconnect(*testing.T) func() {
	p.SetMode(Refuse)
	return func() { p.SetMode(Pass) }
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetMode switches the proxy's behaviour. Refuse also closes every open
// connection, and Reset resets them.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	p.mode = m
	var kill []net.Conn
	if m == Refuse || m == Reset {
		for c := range p.conns {
			kill = append(kill, c)
		}
	}
	p.mu.Unlock()
	if m == Reset {
		// Every connection resets on close, whichever side of a pair is
		// closed first (the other is then closed by serve).
		for _, c := range kill {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		}
	}
	for _, c := range kill {
		_ = c.Close()
	}
}

// abort closes c with a TCP reset instead of a FIN.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// SetDelay delays every forwarded chunk by d.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.SetMode(Refuse)
	p.wg.Wait()
	return err
}

func (p *Proxy) state() (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		switch m, _ := p.state(); m {
		case Refuse:
			_ = c.Close()
			continue
		case Reset:
			abort(c)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	done := make(chan struct{}, 2)
	go p.pipe(server, client, true, done)
	go p.pipe(client, server, false, done)
	<-done
	if m, _ := p.state(); m == Reset {
		abort(client)
		abort(server)
	} else {
		_ = client.Close()
		_ = server.Close()
	}
	<-done
	p.track(client, false)
	p.track(server, false)
}

// pipe copies src to dst; upstream is the client-to-server direction.
func (p *Proxy) pipe(dst, src net.Conn, upstream bool, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			forward := true
		wait:
			for {
				m, d := p.state()
				switch {
				case m == Refuse || m == Reset:
					return
				case m == Drop || (m == HalfOpen && !upstream):
					forward = false
					break wait
				case m == Pass || m == HalfOpen:
					if d > 0 {
						time.Sleep(d)
					}
					break wait
				}
				time.Sleep(10 * time.Millisecond) // blackholed: hold the bytes
			}
			if forward {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
