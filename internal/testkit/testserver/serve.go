package testserver

import (
	"net"
	"testing"
)

// Serve accepts connections on ln until the test ends, when ln is closed,
// and hands each to handle in a goroutine of its own; handle closes it.
func Serve(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
}
