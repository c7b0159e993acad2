//go:build !outbox_failpoints

package failpoint

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCompiledOut: without the build tag, Set refuses, a malformed
// OUTBOX_FAILPOINTS is not even read, and a child process told to kill
// itself at a point runs straight through it.
func TestCompiledOut(t *testing.T) {
	if os.Getenv("FAILPOINT_TEST_CHILD") != "" {
		if err := FromEnv(); err != nil {
			t.Fatal(err)
		}
		_ = Inject(AfterPublishBeforeSettle)
		errs := PublishBatch(t.Context(), []string{"a"}, func(s string) string { return s }, nil, func(_ context.Context, b []string) []error { return make([]error, len(b)) })
		if len(errs) != 1 || errs[0] != nil {
			t.Fatalf("publish results %v", errs)
		}
		os.Stdout.WriteString("survived\n")
		return
	}
	if Compiled {
		t.Fatal("Compiled is true without the outbox_failpoints tag")
	}
	if err := Set("mid_batch=error"); !errors.Is(err, ErrNotCompiled) {
		t.Fatalf("Set: %v, want ErrNotCompiled", err)
	}
	if err := Inject(MidBatch); err != nil {
		t.Fatalf("Inject after a refused Set: %v", err)
	}
	t.Setenv(Env, "mid_batch=bogus")
	if err := FromEnv(); err != nil {
		t.Fatalf("FromEnv read the environment: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCompiledOut$", "-test.v")
	cmd.Env = append(os.Environ(), "FAILPOINT_TEST_CHILD=1", Env+"=after_publish_before_settle=kill;publish=kill:a")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "survived") {
		t.Fatalf("child did not pass the points: %q", out.String())
	}
}
