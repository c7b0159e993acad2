package scenario_test

import (
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/txoutbox/outbox/internal/faultproxy"
)

// proxyURL puts a fault proxy in front of the server rawURL names (on
// defaultPort, if not 0, when the URL has no port), closed when the test
// ends, and returns it with rawURL changed to lead through it.
func proxyURL(t *testing.T, rawURL string, defaultPort int) (*faultproxy.Proxy, *url.URL) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	if u.Port() == "" && defaultPort != 0 {
		target = net.JoinHostPort(u.Hostname(), fmt.Sprint(defaultPort))
	}
	proxy, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	via := *u
	via.Host = proxy.Addr()
	return proxy, &via
}
