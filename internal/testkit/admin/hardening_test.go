package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testhttp"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestHostCheck: a Host header that is not a loopback name, the address
// the connection came in on or an allowed name is answered 421, so a page
// that rebinds its own name to 127.0.0.1 cannot read the API.
func TestHostCheck(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	ts := newAdmin(t, db, &admin.Config{AllowedHosts: []string{"Relay.Internal"}})
	port := ts.Listener.Addr().String()[strings.LastIndexByte(ts.Listener.Addr().String(), ':'):]
	for host, want := range map[string]int{
		"attacker.example" + port: http.StatusMisdirectedRequest,
		"attacker.example":        http.StatusMisdirectedRequest,
		"127.0.0.2" + port:        http.StatusMisdirectedRequest,
		"localhost" + port:        http.StatusOK,
		"LOCALHOST":               http.StatusOK,
		"127.0.0.1" + port:        http.StatusOK,
		"[::1]" + port:            http.StatusOK,
		"relay.internal" + port:   http.StatusOK,
	} {
		for _, path := range []string{"/api/v1/stats", "/"} {
			if got := testhttp.StatusWithHost(t, ts.URL+path, host); got != want {
				t.Errorf("GET %s with Host %q: %d, want %d", path, host, got, want)
			}
		}
	}
	open := newAdmin(t, db, &admin.Config{AllowedHosts: []string{"*"}})
	if got := testhttp.StatusWithHost(t, open.URL+"/api/v1/stats", "anything.example"); got != http.StatusOK {
		t.Errorf(`AllowedHosts "*": %d, want 200`, got)
	}
}

// TestMetricsOnly: a metrics-only server answers /metrics, /healthz and
// /readyz for any Host and nothing else.
func TestMetricsOnly(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	enqueue(t, db, "order.created", 1)
	ts := newAdmin(t, db, &admin.Config{MetricsOnly: true, Gatherer: prometheus.NewRegistry()})
	for path, want := range map[string]int{
		"/metrics": 200, "/healthz": 200, "/readyz": 200,
		"/": 404, "/api/v1/stats": 404, "/api/v1/messages": 404, "/app.js": 404,
	} {
		if got := testhttp.StatusWithHost(t, ts.URL+path, "prometheus.example:9090"); got != want {
			t.Errorf("GET %s: %d, want %d", path, got, want)
		}
	}
}

// TestSearchBadBytes: a search parameter that is not UTF-8 text is the
// caller's error (400) on every database, not a failed query (500).
func TestSearchBadBytes(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *testdb.DB) {
		ts := newAdmin(t, db, nil)
		for _, q := range []string{"topic=order.%ff%fe", "key=%c3%28", "topic=a%00b", "key=%00"} {
			call(t, ts, "GET", "/api/v1/messages?"+q, opsToken, nil).wantError(t, 400, "is not UTF-8 text")
		}
	})
}
