package brokertest

import (
	"crypto/rand"
	"net"
	"strconv"
	"testing"
)

// FreePort returns a loopback TCP port nobody listens on right now, for a
// broker process of the test's own. It is drawn below the kernel's
// ephemeral range (32768 and up on Linux), so that while that broker is
// down for an outage no socket opened on port 0 (reconnection attempts,
// other tests) can take its port before the restart.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		port := 20000 + (int(b[0])<<8|int(b[1]))%12000
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = ln.Close()
		return port
	}
	t.Fatal("no free port in 20000-31999")
	return 0
}
