package demo_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/cmd/outbox/internal/cli"
	"github.com/txoutbox/outbox/cmd/outbox/internal/demo"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMain lets the test binary stand in for the outbox binary: the demo
// starts its relay as `<self> relay …`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "relay" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func runDemo(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := demo.Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDemoOnSQLiteLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("demo runs for several seconds: -short")
	}
	code, out, errs := runDemo(t, "--orders", "400", "--rate", "200", "--outage", "1s")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, want := range []string{"relay killed with SIGKILL", "verified OK: 400 orders written, 400 messages delivered, lost 0, unexpected 0"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("demo runs for several seconds: -short")
	}
	db := testdb.Empty(t, store.Postgres)
	code, out, errs := runDemo(t, "--db", db.URL, "--orders", "300", "--rate", "300", "--outage", "500ms")
	if code != 0 || !strings.Contains(out, "verified OK: 300 orders written, 300 messages delivered, lost 0") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

func TestDemoBadUsage(t *testing.T) {
	for _, args := range [][]string{{"--orders", "0"}, {"--rate", "-1"}, {"--fail-rate", "1.5"}, {"--db", "oracle://x"}, {"extra"}, {"--nope"}} {
		code, _, errs := runDemo(t, args...)
		if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "outbox: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}
