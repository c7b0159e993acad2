package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestParseAdminAddr(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		":8081":               "127.0.0.1:8081",
		"0.0.0.0:8081":        "0.0.0.0:8081",
		"localhost:0":         "localhost:0",
		"[::1]:9000":          "[::1]:9000",
		" 10.0.0.5:80 ":       "10.0.0.5:80",
		"admin.internal:8081": "admin.internal:8081",
	}
	for in, want := range good {
		if got, err := parseAdminAddr(in); err != nil || got != want {
			t.Errorf("parseAdminAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"8081", "abc", "", ":http", ":65536", "host:-1", "a b:80", "http://x:80"} {
		if got, err := parseAdminAddr(in); err == nil {
			t.Errorf("parseAdminAddr(%q) = %q, want an error", in, got)
		}
	}
}

func TestAdminSettingsErrors(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range vars {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	run(t, vars, "relay", "--to", "stdout://", "--admin", "abc").failed(t, ExitUsage, `relay: --admin "abc"`, "HOST:PORT")
	run(t, vars, "relay", "--to", "stdout://", "--admin", ":99999").failed(t, ExitUsage, "--admin", "65535")
	run(t, vars, "relay", "--to", "stdout://", "--admin", "").failed(t, ExitUsage, "--admin")
	run(t, with(map[string]string{"OUTBOX_ADMIN_ADDR": "nope"}), "relay", "--to", "stdout://").failed(t, ExitUsage, `OUTBOX_ADMIN_ADDR "nope"`)
	run(t, vars, "admin", "--admin", "8081").failed(t, ExitUsage, `admin: --admin "8081"`)
	run(t, vars, "admin", "stray").failed(t, ExitUsage, "unexpected argument")

	cfg := writeFile(t, "bad-addr.yaml", "admin: 127.0.0.1\n")
	run(t, vars, "relay", "--to", "stdout://", "--config", cfg).failed(t, ExitUsage, "bad-addr.yaml: admin", `"127.0.0.1"`)
	cfg = writeFile(t, "empty-token.yaml", "admin: :0\nadmin_tokens:\n  ops: \"\"\n")
	run(t, vars, "admin", "--config", cfg).failed(t, ExitUsage, "admin_tokens.ops: the token is empty")
	cfg = writeFile(t, "clash.yaml", "admin_tokens:\n  admin: s3cret-from-config\n")
	r := run(t, with(map[string]string{"OUTBOX_ADMIN_TOKEN": "s3cret-from-env"}), "admin", "--config", cfg, "--admin", ":0")
	r.failed(t, ExitUsage, `admin_tokens.admin: the name "admin" is taken by OUTBOX_ADMIN_TOKEN`)
	if strings.Contains(r.stderr, "s3cret") {
		t.Errorf("a token was printed: %s", r.stderr)
	}
	cfg = writeFile(t, "typo.yaml", "admin_token:\n  ops: x\n")
	run(t, vars, "admin", "--config", cfg).failed(t, ExitUsage, `unknown key "admin_token"`)

	// A taken port is a failure at start, before the relay runs.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	run(t, vars, "relay", "--to", "stdout://", "--admin", taken.Addr().String()).failed(t, ExitFailure, "admin: listen on "+taken.Addr().String())
	run(t, vars, "admin", "--admin", taken.Addr().String()).failed(t, ExitFailure, "admin: listen on")
}

// startCLI runs the command line in the background until the returned
// stop is called; it returns the admin address the command logged.
func startCLI(t *testing.T, vars map[string]string, args ...string) (addr string, stderr *syncbuf.Buffer, stop func() int) {
	t.Helper()
	return startListening(t, "admin", vars, args...)
}

// startListening is startCLI waiting for the listener of what ("admin",
// "metrics") instead.
func startListening(t *testing.T, what string, vars map[string]string, args ...string) (addr string, stderr *syncbuf.Buffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout syncbuf.Buffer
	stderr = &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- testEnv(ctx, vars, nil, &stdout, stderr).main(args) }()
	listening := regexp.MustCompile(`outbox ` + what + `: listening" addr=(\S+)`)
	waitFor(t, "the "+what+" listener", func() bool {
		select {
		case code := <-done:
			t.Fatalf("%v exited %d early\nstderr: %s", args, code, stderr.String())
		default:
		}
		m := listening.FindStringSubmatch(stderr.String())
		if m == nil {
			return false
		}
		addr = m[1]
		return true
	})
	var code int
	stopped := false
	stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			code = <-done
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return addr, stderr, stop
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return do(t, "GET", url, token)
}

func do(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestRelayAdmin: 'outbox relay --admin' serves health, metrics and the
// API next to the relay, takes OUTBOX_ADMIN_TOKEN and config tokens,
// records changes under the token's name and stops with the relay.
func TestRelayAdmin(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	id := enqueueOK(t, vars, "--topic", "mail.bounced", "--payload", "{}")
	markDead(t, db, "mail.bounced")
	vars["OUTBOX_ADMIN_TOKEN"] = "env-token-31415"
	cfg := writeFile(t, "admin.yaml", "admin: 127.0.0.1:0\nadmin_tokens:\n  ops: cfg-token-27182\n")
	// The relay routes nothing but order.* so the requeued message goes
	// dead again with "no route" instead of leaving the table.
	addr, stderr, stop := startCLI(t, vars, "relay", "--route", "order.*=stdout://", "--config", cfg, "--max-poll", "50ms")
	base := "http://" + addr

	if code, body := get(t, base+"/healthz", ""); code != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
	waitFor(t, "/readyz 200", func() bool { code, _ := get(t, base+"/readyz", ""); return code == 200 })
	code, metrics := get(t, base+"/metrics", "")
	if code != 200 || !strings.Contains(metrics, "go_goroutines") || !strings.Contains(metrics, "process_") || !strings.Contains(metrics, "outbox_pending_messages") {
		t.Errorf("metrics: %d\n%.500s", code, metrics)
	}
	if code, _ := get(t, base+"/api/v1/stats", ""); code != 401 {
		t.Errorf("stats without a token: %d, want 401", code)
	}
	if code, body := get(t, base+"/api/v1/stats", "cfg-token-27182"); code != 200 || !strings.Contains(body, `"dead":1`) {
		t.Errorf("stats: %d %s", code, body)
	}
	if code, body := do(t, "POST", base+"/api/v1/messages/"+id+"/requeue", "env-token-31415"); code != 200 {
		t.Fatalf("requeue: %d %s", code, body)
	}
	var audit struct {
		Entries []struct{ Actor, Action, Target string }
	}
	_, body := get(t, base+"/api/v1/audit", "cfg-token-27182")
	if err := json.Unmarshal([]byte(body), &audit); err != nil || len(audit.Entries) != 1 || audit.Entries[0].Actor != "admin" || audit.Entries[0].Target != id {
		t.Errorf("audit: %s", body)
	}
	waitFor(t, "the requeued message dead again (no route)", func() bool {
		return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead' AND last_error LIKE '%no route%'") == 1
	})
	if code := stop(); code != 0 {
		t.Fatalf("relay exited %d\n%s", code, stderr.String())
	}
	for _, want := range []string{"outbox relay: stopped", "outbox admin: stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	for _, secret := range []string{"env-token-31415", "cfg-token-27182"} {
		if strings.Contains(stderr.String(), secret) {
			t.Errorf("a token was logged:\n%s", stderr.String())
		}
	}
	if code, _, err := tryGet(base + "/healthz"); err == nil {
		t.Errorf("admin still answers after the relay stopped: %d", code)
	}
}

func tryGet(url string) (int, string, error) {
	res, err := http.Get(url) //nolint:noctx // a probe that must fail
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

// TestAdminCommand: 'outbox admin' serves the API without a relay; with
// no token, reads work and changes are refused.
func TestAdminCommand(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	id := enqueueOK(t, vars, "--topic", "mail.bounced", "--payload", "{}")
	markDead(t, db, "mail.bounced")
	addr, stderr, stop := startCLI(t, vars, "admin", "--admin", "127.0.0.1:0")
	base := "http://" + addr
	if code, body := get(t, base+"/readyz", ""); code != 200 {
		t.Errorf("readyz: %d %s", code, body)
	}
	if code, body := get(t, base+"/api/v1/messages?status=dead", ""); code != 200 || !strings.Contains(body, id) {
		t.Errorf("dead messages: %d %s", code, body)
	}
	if code, body := do(t, "POST", base+"/api/v1/messages/"+id+"/requeue", ""); code != 403 {
		t.Errorf("requeue without tokens: %d %s, want 403", code, body)
	}
	if code, body := get(t, base+"/", ""); code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("page: %d %.200s", code, body)
	}
	if code := stop(); code != 0 {
		t.Fatalf("admin exited %d\n%s", code, stderr.String())
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead'"); n != 1 {
		t.Errorf("%d dead messages, want 1", n)
	}
}

// TestDeadDryRunAndBatches: --dry-run counts without changing; a bulk run
// in batches reports progress on stderr and leaves one audit row.
func TestDeadDryRunAndBatches(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		vars := dbVars(db)
		var ids []string
		for i := range 5 {
			ids = append(ids, enqueueOK(t, vars, "--topic", "billing.failed", "--key", fmt.Sprint("k", i), "--payload", "{}"))
		}
		markDead(t, db, "billing.failed")
		dead := func() int { return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead'") }

		r := run(t, vars, "dead", "requeue", "--all", "--dry-run").ok(t)
		if r.stdout != "would requeue 5 dead messages\n" || r.stderr != "" {
			t.Errorf("dry run: %q %q", r.stdout, r.stderr)
		}
		r = run(t, vars, "dead", "discard", "--id", ids[0], "--id", ids[1], "--dry-run").ok(t)
		if r.stdout != "would discard 2 dead messages\n" {
			t.Errorf("dry run by id: %q", r.stdout)
		}
		if r := run(t, vars, "dead", "discard", "--topic", "nothing.here", "--dry-run").ok(t); r.stdout != "would discard 0 dead messages\n" {
			t.Errorf("dry run of nothing: %q", r.stdout)
		}
		if n := dead(); n != 5 {
			t.Fatalf("dry runs changed rows: %d dead", n)
		}
		if n := db.Count(t, "SELECT count(*) FROM outbox_audit"); n != 0 {
			t.Errorf("dry runs were audited: %d rows", n)
		}
		run(t, vars, "dead", "requeue", "--all", "--batch-size", "0").failed(t, ExitUsage, "--batch-size must be at least 1")

		r = run(t, vars, "dead", "requeue", "--topic", "billing.failed", "--batch-size", "2").ok(t)
		if r.stdout != "requeued 5 dead messages\n" {
			t.Errorf("requeue: %q", r.stdout)
		}
		if want := "dead requeue: 2 of 5\ndead requeue: 4 of 5\ndead requeue: 5 of 5\n"; r.stderr != want {
			t.Errorf("progress %q, want %q", r.stderr, want)
		}
		if n := dead(); n != 0 {
			t.Errorf("%d dead after requeue", n)
		}
		var actor, action, target string
		var count int
		err := db.SQL.QueryRowContext(t.Context(), "SELECT actor, action, target, count FROM outbox_audit").Scan(&actor, &action, &target, &count)
		if err != nil || actor != "cli" || action != "requeue" || count != 5 || !strings.Contains(target, `"topic":"billing.failed"`) {
			t.Errorf("audit row: %v %q %q %q %d", err, actor, action, target, count)
		}
	})
}
