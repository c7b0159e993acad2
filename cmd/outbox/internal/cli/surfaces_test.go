package cli

import (
	"bufio"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testhttp"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestAdminBeyondLoopbackNeedsToken: an admin server reachable beyond
// loopback without a token refuses to start (exit 2), reads included,
// unless the operator says --admin-insecure-open (or
// admin_insecure_open in the config file).
func TestAdminBeyondLoopbackNeedsToken(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	run(t, vars, "admin", "--admin", "0.0.0.0:0").failed(t, ExitUsage, "beyond loopback with no token", "--admin-insecure-open")
	run(t, vars, "relay", "--to", "stdout://", "--admin", "0.0.0.0:0").failed(t, ExitUsage, "beyond loopback with no token")
	_, stderr, stop := startCLI(t, vars, "admin", "--admin", "0.0.0.0:0", "--admin-insecure-open")
	if !strings.Contains(stderr.String(), "listening beyond loopback without a token") {
		t.Errorf("no warning for an open admin server:\n%s", stderr.String())
	}
	stop()
	cfg := writeFile(t, "open.yaml", "admin: 0.0.0.0:0\nadmin_insecure_open: true\n")
	_, _, stop = startCLI(t, vars, "admin", "--config", cfg)
	stop()
	tokened := map[string]string{"OUTBOX_ADMIN_TOKEN": "a-long-enough-admin-token-4242"}
	for k, v := range vars {
		tokened[k] = v
	}
	_, stderr, stop = startCLI(t, tokened, "admin", "--admin", "0.0.0.0:0")
	stop()
	if strings.Contains(stderr.String(), "shorter than 16") {
		t.Errorf("a long token drew the short-token warning:\n%s", stderr.String())
	}
}

// TestAdminShortTokenWarns: a token under 16 characters starts with a
// warning naming the token, never its secret.
func TestAdminShortTokenWarns(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	vars["OUTBOX_ADMIN_TOKEN"] = "short-tok"
	_, stderr, stop := startCLI(t, vars, "admin", "--admin", "127.0.0.1:0")
	stop()
	out := stderr.String()
	if !strings.Contains(out, "shorter than 16 characters") || !strings.Contains(out, "token=admin") || strings.Contains(out, "short-tok") {
		t.Errorf("want one warning naming token admin, without its secret:\n%s", out)
	}
}

// TestAdminHostCheck: the admin server answers 421 to a Host it does not
// know, and serves names given with --admin-allow-host.
func TestAdminHostCheck(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	addr, _, _ := startCLI(t, dbVars(db), "admin", "--admin", "127.0.0.1:0", "--admin-allow-host", "ops.example")
	for host, want := range map[string]int{"rebound.example": 421, "ops.example": 200, addr: 200, "localhost": 200} {
		if got := testhttp.StatusWithHost(t, "http://"+addr+"/api/v1/stats", host); got != want {
			t.Errorf("Host %q: %d, want %d", host, got, want)
		}
	}
}

// TestAdminSlowRequestCut: a client that sends its request body slowly
// has its connection closed by the server's read timeout instead of
// holding it open.
func TestAdminSlowRequestCut(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	addr, _, _ := startCLI(t, dbVars(db), "admin", "--admin", "127.0.0.1:0")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/messages/requeue HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n{", addr)
	// Trickle a byte a second; the server must end the connection before
	// the body is done (1000 s), after its read timeout.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = bufio.NewReader(conn).ReadString(0)
	}()
	deadline := time.After(3 * adminReadTimeout)
	for {
		select {
		case <-closed:
			return
		case <-deadline:
			t.Fatalf("the connection is still open after %s of a slow body", 3*adminReadTimeout)
		case <-time.After(time.Second):
			_, _ = conn.Write([]byte(" "))
		}
	}
}

// TestRelayMetricsListener: --metrics serves /metrics, /healthz and
// /readyz, for any Host, beyond loopback without a token, and nothing of
// the admin API or the web page.
func TestRelayMetricsListener(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	cfg := writeFile(t, "metrics.yaml", "metrics: 0.0.0.0:0\n")
	_, stderr, stop := startCLI(t, vars, "relay", "--to", "stdout://", "--config", cfg, "--admin", "127.0.0.1:0")
	listening := regexp.MustCompile(`outbox metrics: listening" addr=\S+:(\d+)`)
	var base string
	waitFor(t, "the metrics listener", func() bool {
		m := listening.FindStringSubmatch(stderr.String())
		if m != nil {
			base = "http://127.0.0.1:" + m[1]
		}
		return m != nil
	})
	waitFor(t, "/readyz 200", func() bool { return testhttp.StatusWithHost(t, base+"/readyz", "prometheus.example") == 200 })
	code, body := get(t, base+"/metrics", "")
	if code != 200 || !strings.Contains(body, "outbox_pending_messages") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("metrics: %d\n%.300s", code, body)
	}
	for path, want := range map[string]int{"/healthz": 200, "/metrics": 200, "/": 404, "/api/v1/stats": 404, "/api/v1/messages": 404} {
		if got := testhttp.StatusWithHost(t, base+path, "prometheus.example:9090"); got != want {
			t.Errorf("GET %s: %d, want %d", path, got, want)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("relay exited %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "outbox metrics: stopped") {
		t.Errorf("stderr lacks the metrics listener's stop:\n%s", stderr.String())
	}
	run(t, vars, "relay", "--to", "stdout://", "--metrics", "nope").failed(t, ExitUsage, `relay: --metrics "nope"`)
}
