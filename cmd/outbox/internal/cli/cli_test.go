package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// result is what one run of the command line produced.
type result struct {
	code           int
	stdout, stderr string
}

// testEnv is an env whose variables come from vars only, so tests that use
// it may run in parallel.
func testEnv(ctx context.Context, vars map[string]string, stdin io.Reader, stdout, stderr io.Writer) *env {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	return &env{ctx: ctx, stdout: stdout, stderr: stderr, stdin: stdin, getenv: func(k string) string { return vars[k] }}
}

// run runs the command line with the given environment variables.
func run(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	return runIn(t, vars, nil, args...)
}

// enqueueOK runs 'outbox enqueue' with args, fails the test unless it
// succeeds, and returns the message id it prints.
func enqueueOK(t *testing.T, vars map[string]string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(run(t, vars, append([]string{"enqueue"}, args...)...).ok(t).stdout)
}

// runIn is run with standard input.
func runIn(t *testing.T, vars map[string]string, stdin io.Reader, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := testEnv(t.Context(), vars, stdin, &out, &errb).main(args)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok fails the test unless r succeeded.
func (r result) ok(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

// failed asserts exit status code with exactly one "outbox: " line on
// stderr that contains every want.
func (r result) failed(t *testing.T, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	// Warnings (a password given as a flag) may come before the error.
	errLine := r.stderr
	for strings.HasPrefix(errLine, "outbox: warning: ") && strings.Count(errLine, "\n") > 1 {
		_, errLine, _ = strings.Cut(errLine, "\n")
	}
	if !strings.HasPrefix(errLine, "outbox: ") || !strings.HasSuffix(errLine, "\n") || strings.Count(errLine, "\n") != 1 {
		t.Errorf("stderr is not one \"outbox: \" line: %q", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q does not contain %q", r.stderr, w)
		}
	}
}

func (r result) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHelp(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"help"}, {"--help"}, {"-h"},
		{"help", "relay"}, {"help", "dead"}, {"help", "dead", "list"}, {"help", "migrate", "sql"},
		{"relay", "--help"}, {"status", "-h"}, {"dead", "requeue", "--help"}, {"dead", "--help"},
		{"migrate", "sql", "--help"}, {"enqueue", "--help"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := run(t, nil, args...).ok(t)
			if r.stderr != "" || !strings.Contains(r.stdout, "outbox") {
				t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
			}
		})
	}
	r := run(t, nil, "help")
	for _, c := range commands {
		if !strings.Contains(r.stdout, c.name) {
			t.Errorf("help does not list %q", c.name)
		}
	}
	r = run(t, nil, "relay", "--help")
	for _, f := range []string{"--to URL", "--route PATTERN=URL", "--retry-schedule", "--log-format", "--batch-size N"} {
		if !strings.Contains(r.stdout, f) {
			t.Errorf("relay --help does not mention %q:\n%s", f, r.stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := run(t, nil, args...).ok(t)
		if !strings.HasPrefix(r.stdout, "outbox ") {
			t.Errorf("%v: %q", args, r.stdout)
		}
	}
}

// TestUsageErrors: bad usage and configuration exit 2 with one line,
// before any database is needed.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	badKey := writeFile(t, "bad-key.yaml", "to: stdout://\nrelay:\n  batch_size: 10\n  lease_tll: 5s\n")
	badDur := writeFile(t, "bad-dur.yaml", "relay:\n  lease_ttl: soon\nto: stdout://\n")
	badList := writeFile(t, "bad-list.yaml", "routes:\n  - pattern: a.*\n    to: stdout://\n    retry:\n      schedule: 10s\n")
	noTo := writeFile(t, "no-to.yaml", "routes:\n  - pattern: a.*\n")
	badYAML := writeFile(t, "bad.yaml", "routes: [\n")
	db := map[string]string{"OUTBOX_DATABASE_URL": "sqlite://" + filepath.Join(t.TempDir(), "never.db")}
	cases := []struct {
		name string
		vars map[string]string
		args []string
		want []string
	}{
		{"no command", nil, nil, []string{"no command", "run 'outbox help'"}},
		{"unknown command", nil, []string{"frobnicate"}, []string{`unknown command "frobnicate"`, "run 'outbox help'"}},
		{"unknown flag before command", nil, []string{"--frob", "status"}, []string{`"--frob"`, "run 'outbox help'"}},
		{"unknown flag", nil, []string{"status", "--frob"}, []string{"unknown flag --frob", "run 'outbox help status'"}},
		{"flag without value", nil, []string{"status", "--db"}, []string{"flag --db needs a value"}},
		{"bad flag value", nil, []string{"relay", "--batch-size", "many"}, []string{"--batch-size"}},
		{"unexpected argument", nil, []string{"status", "extra"}, []string{`unexpected argument "extra"`}},
		{"unknown subcommand", nil, []string{"dead", "revive"}, []string{`unknown subcommand "revive"`}},
		{"missing subcommand", nil, []string{"dead"}, []string{"missing subcommand", "list"}},
		{"flags before subcommand", nil, []string{"dead", "--json", "list"}, []string{"put the subcommand", "before the flags"}},
		{"migrate flags before sql", nil, []string{"migrate", "--db", "sqlite://x.db", "sql"}, []string{"outbox migrate sql"}},
		{"help unknown", nil, []string{"help", "frob"}, []string{`unknown command "frob"`}},
		{"no db", nil, []string{"status"}, []string{"OUTBOX_DATABASE_URL", "--db"}},
		{"no db migrate", nil, []string{"migrate"}, []string{"OUTBOX_DATABASE_URL"}},
		{"bad db scheme", nil, []string{"status", "--db", "oracle://h/x"}, []string{"bad database URL", "oracle"}},
		{"relay without routes", db, []string{"relay"}, []string{"no routes", "--to", "--route"}},
		{"bad route pattern", db, []string{"relay", "--route", "order.>.x=stdout://"}, []string{"order.>.x", "'>' must be the last segment"}},
		{"route without url", db, []string{"relay", "--route", "order.*"}, []string{"want PATTERN=URL"}},
		{"bad url scheme", db, []string{"relay", "--to", "ftp://example.com/x"}, []string{"--to", `unknown scheme "ftp"`}},
		{"bad url scheme in env", map[string]string{"OUTBOX_TO": "gopher://x"}, []string{"relay"}, []string{"OUTBOX_TO", "gopher"}},
		{"bad yaml key", db, []string{"relay", "--config", badKey}, []string{badKey, `unknown key "relay.lease_tll"`, "line 4"}},
		{"bad yaml key via env", map[string]string{"OUTBOX_CONFIG": badKey}, []string{"status"}, []string{`unknown key "relay.lease_tll"`}},
		{"bad duration in config", db, []string{"relay", "--config", badDur}, []string{"relay.lease_ttl", `"soon" is not a duration`}},
		{"scalar for list in config", db, []string{"relay", "--config", badList}, []string{"routes[0].retry.schedule", "want a list"}},
		{"config route without to", db, []string{"relay", "--config", noTo}, []string{"routes[0]", "to is required"}},
		{"broken yaml", db, []string{"relay", "--config", badYAML}, []string{badYAML}},
		{"missing config", db, []string{"status", "--config", "/nonexistent/outbox.yaml"}, []string{"/nonexistent/outbox.yaml"}},
		{"bad batch size env", map[string]string{"OUTBOX_BATCH_SIZE": "lots"}, []string{"relay", "--to", "stdout://"}, []string{"OUTBOX_BATCH_SIZE", `"lots"`}},
		{"bad log level", db, []string{"relay", "--to", "stdout://", "--log-level", "loud"}, []string{"log level", "loud"}},
		{"bad log level env", map[string]string{"OUTBOX_LOG_LEVEL": "chatty"}, []string{"relay", "--to", "stdout://"}, []string{"chatty"}},
		{"bad log format", db, []string{"relay", "--to", "stdout://", "--log-format", "xml"}, []string{"log format", "xml"}},
		{"negative duration", db, []string{"relay", "--to", "stdout://", "--lease-ttl", "-1s"}, []string{"--lease-ttl"}},
		{"short lease", db, []string{"relay", "--to", "stdout://", "--lease-ttl", "100ms"}, []string{"lease TTL"}},
		{"bad retry schedule", db, []string{"relay", "--to", "stdout://", "--retry-schedule", "10s,often"}, []string{"--retry-schedule", "often"}},
		{"enqueue without topic", db, []string{"enqueue", "--payload", "{}"}, []string{"--topic is required"}},
		{"enqueue without payload", db, []string{"enqueue", "--topic", "a"}, []string{"--payload"}},
		{"enqueue with two payloads", db, []string{"enqueue", "--topic", "a", "--payload", "{}", "--payload-file", "x"}, []string{"exactly one"}},
		{"enqueue bad header", db, []string{"enqueue", "--topic", "a", "--payload", "{}", "--header", "novalue"}, []string{"NAME=VALUE"}},
		{"enqueue negative delay", db, []string{"enqueue", "--topic", "a", "--payload", "{}", "--delay", "-1s"}, []string{"--delay"}},
		{"requeue without selector", db, []string{"dead", "requeue"}, []string{"exactly one of --id, --topic or --all"}},
		{"discard with two selectors", db, []string{"dead", "discard", "--all", "--topic", "a"}, []string{"exactly one"}},
		{"requeue bad id", db, []string{"dead", "requeue", "--id", "42"}, []string{`--id "42"`, "UUID"}},
		{"dead list bad limit", db, []string{"dead", "list", "--limit", "0"}, []string{"--limit"}},
		{"dead list payload without json", db, []string{"dead", "list", "--with-payload"}, []string{"--with-payload needs --json"}},
		{"replay without selector", db, []string{"replay"}, []string{"give a filter", "--all"}},
		{"replay all with a filter", db, []string{"replay", "--all", "--topic", "a"}, []string{"--all and a filter"}},
		{"replay bad since", db, []string{"replay", "--since", "yesterday"}, []string{`--since "yesterday"`, "not a time"}},
		{"replay since after until", db, []string{"replay", "--since", "2026-02-01", "--until", "2026-01-01"}, []string{"--since must be before --until"}},
		{"replay bad status", db, []string{"replay", "--topic", "a", "--status", "dead"}, []string{"--status must be sent or consumed"}},
		{"replay bad id", db, []string{"replay", "--id", "x"}, []string{`--id "x"`}},
		{"migrate sql without dialect", nil, []string{"migrate", "sql"}, []string{"--dialect"}},
		{"migrate sql bad dialect", nil, []string{"migrate", "sql", "--dialect", "oracle"}, []string{"oracle"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			run(t, c.vars, c.args...).failed(t, ExitUsage, c.want...)
		})
	}
}

// TestSecretsNeverPrinted: a password in a database or destination URL,
// or a webhook secret, appears in no error line or log.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	const pw = "s3cr3tpw"
	unreachable := "mysql://u:" + pw + "@127.0.0.1:1/x"
	cfg := writeFile(t, "secret.yaml", "database: "+unreachable+"\nwebhook_secret: whsec_"+pw+"\nroutes:\n  - pattern: a.*\n    to: https://u:"+pw+"@example.com/\n    secret: "+pw+"x-of-the-route\n")
	cases := []struct {
		name string
		vars map[string]string
		args []string
		code int
	}{
		{"status", nil, []string{"status", "--db", unreachable}, ExitFailure},
		{"migrate", nil, []string{"migrate", "--db", unreachable}, ExitFailure},
		{"dead list", nil, []string{"dead", "list", "--db", unreachable}, ExitFailure},
		{"enqueue", nil, []string{"enqueue", "--db", unreachable, "--topic", "a", "--payload", "{}"}, ExitFailure},
		{"relay", map[string]string{"OUTBOX_WEBHOOK_SECRET": pw + "-hook-secret"}, []string{"relay", "--db", unreachable, "--to", "http://user:" + pw + "@example.com/"}, ExitFailure},
		{"short webhook secret", map[string]string{"OUTBOX_WEBHOOK_SECRET": pw + "-hook"}, []string{"relay", "--db", unreachable, "--to", "http://user:" + pw + "@example.com/"}, ExitUsage},
		{"env url", map[string]string{"OUTBOX_DATABASE_URL": unreachable}, []string{"status"}, ExitFailure},
		{"config url", nil, []string{"relay", "--config", cfg}, ExitFailure},
		{"bad db scheme", nil, []string{"status", "--db", "oracle://u:" + pw + "@h/x"}, ExitUsage},
		{"unparsable db url", nil, []string{"status", "--db", "postgres://u:" + pw + "@h:port/x"}, ExitUsage},
		{"bad route url", nil, []string{"relay", "--db", unreachable, "--route", "a.*=ftp://u:" + pw + "@h/"}, ExitUsage},
		{"bad route pattern", nil, []string{"relay", "--db", unreachable, "--route", "a.>.b=https://u:" + pw + "@h/"}, ExitUsage},
		{"route without pattern", nil, []string{"relay", "--db", unreachable, "--route", "https://u:" + pw + "@h/"}, ExitUsage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, c.vars, c.args...)
			r.failed(t, c.code)
			if strings.Contains(r.stderr+r.stdout, pw) {
				t.Errorf("output shows the secret:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		pos  []string
		json bool
		id   string
	}{
		{[]string{"--json", "a", "--id", "x", "b"}, []string{"a", "b"}, true, "x"},
		{[]string{"a", "--json"}, []string{"a"}, true, ""},
		{[]string{"--id", "x", "--", "--json"}, []string{"--json"}, false, "x"},
		{[]string{"--id", "--", "b"}, []string{"b"}, false, "--"},
		{nil, nil, false, ""},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		j := fs.Bool("json", false, "")
		id := fs.String("id", "", "")
		pos, err := parseArgs(fs, c.args)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if !reflect.DeepEqual(pos, c.pos) || *j != c.json || *id != c.id {
			t.Errorf("%v: pos %q json %v id %q", c.args, pos, *j, *id)
		}
	}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	var got []string
	t.Cleanup(func() {
		extraMu.Lock()
		delete(extraCommands, "zz-extra")
		extraMu.Unlock()
	})
	Register("zz-extra", "a registered test command", func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		got = append(got, strings.Join(args, " "))
		if len(args) > 0 && args[0] == "--fail" {
			io.WriteString(stderr, "outbox: zz-extra failed\n")
			return 1
		}
		io.WriteString(stdout, "extra ran\n")
		return 0
	})
	r := run(t, nil, "zz-extra", "--n", "3").ok(t)
	if r.stdout != "extra ran\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	run(t, nil, "zz-extra", "--fail").failed(t, 1, "zz-extra failed")
	run(t, nil, "help", "zz-extra").ok(t)
	if want := []string{"--n 3", "--fail", "--help"}; !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if r := run(t, nil, "help"); !strings.Contains(r.stdout, "zz-extra") || !strings.Contains(r.stdout, "a registered test command") {
		t.Errorf("help does not list the registered command:\n%s", r.stdout)
	}
	for _, name := range []string{"zz-extra", "status", "dead", "migrate", "help", "", "two words"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			Register(name, "", func(context.Context, []string, io.Writer, io.Writer) int { return 0 })
		}()
	}
}

// TestMainReadsEnvironment goes through Main and the process environment.
func TestMainReadsEnvironment(t *testing.T) {
	t.Setenv("OUTBOX_DATABASE_URL", "oracle://u:pw1234@h/x")
	var out, errb bytes.Buffer
	if code := Main(t.Context(), []string{"status"}, &out, &errb); code != ExitUsage {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(errb.String(), "oracle") || strings.Contains(errb.String(), "pw1234") {
		t.Errorf("stderr %q", errb.String())
	}
}
