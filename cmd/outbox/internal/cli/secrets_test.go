package cli

import (
	"strings"
	"testing"
)

// TestDBFormsNeverPrintThePassword: whatever form --db takes, the error
// line hides the password; mysql:// parameters outside the allow-list are
// a usage error naming the parameter.
func TestDBFormsNeverPrintThePassword(t *testing.T) {
	t.Parallel()
	for _, db := range []string{
		"app:pw-4f2a9c@db.internal/app",
		"host=db.internal user=app password=pw-4f2a9c dbname=app",
		"host=db.internal password='pw-4f2a9c x'",
		"root:pw-4f2a9c@tcp(db.internal:3306)/app",
		"mysql://root:pw-4f2a9c@db.internal/app?password=pw-4f2a9c",
	} {
		r := run(t, map[string]string{"OUTBOX_DATABASE_URL": db}, "status")
		r.failed(t, ExitUsage, "bad database URL")
		if strings.Contains(r.stderr, "pw-4f2a9c") || strings.Contains(r.stdout, "pw-4f2a9c") {
			t.Errorf("%q: the password was printed: %q", db, r.stderr)
		}
		if r := run(t, nil, "status", "--db", db); r.code != ExitUsage || strings.Contains(r.stderr, "pw-4f2a9c") {
			t.Errorf("--db %q: exit %d, stderr %q", db, r.code, r.stderr)
		}
	}
	run(t, map[string]string{"OUTBOX_DATABASE_URL": "mysql://root@127.0.0.1/test?allowAllFiles=true"}, "status").
		failed(t, ExitUsage, `query parameter "allowAllFiles" is not allowed`)
}

// TestPasswordFlagWarns: a password on the command line draws one warning
// naming the flag and where else to give it; the password is not printed.
func TestPasswordFlagWarns(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "status", "--db", "mysql://root:pw-77e1b0@127.0.0.1:1/test")
	if r.code != ExitFailure {
		t.Errorf("exit %d, want %d (nothing listens on port 1)", r.code, ExitFailure)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "warning: --db holds a password") || !strings.Contains(lines[0], "OUTBOX_DATABASE_URL") {
		t.Errorf("want one warning then the error, got %q", r.stderr)
	}
	if strings.Contains(r.stderr, "pw-77e1b0") {
		t.Errorf("the password was printed: %q", r.stderr)
	}
	r = run(t, nil, "relay", "--db", "sqlite:///nonexistent/x.db", "--route", "order.*=amqp://guest:pw-77e1b0@127.0.0.1:1/", "--to", "stdout://")
	if !strings.Contains(r.stderr, "warning: --route holds a password") || strings.Contains(r.stderr, "pw-77e1b0") {
		t.Errorf("--route with a password: %q", r.stderr)
	}
	if r := run(t, nil, "status", "--db", "mysql://root@127.0.0.1:1/test"); strings.Contains(r.stderr, "warning") {
		t.Errorf("a URL without a password drew a warning: %q", r.stderr)
	}
}
