//go:build outbox_failpoints

package failpoint

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The points are process-wide: these tests do not run in parallel.

func set(t *testing.T, s string) {
	t.Helper()
	if err := Set(s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Set("") })
}

func TestParse(t *testing.T) {
	good := []struct {
		spec string
		want []rule
	}{
		{"", nil},
		{"after_publish_before_settle=kill", []rule{{point: AfterPublishBeforeSettle, action: "kill"}}},
		{" after_read_before_publish=kill@3 ; mid_batch=error ", []rule{
			{point: AfterReadBeforePublish, action: "kill", nth: 3},
			{point: MidBatch, action: "error"},
		}},
		{"before_settle=sleep:1500ms@2", []rule{{point: BeforeSettle, action: "sleep", sleep: 1500 * time.Millisecond, nth: 2}}},
		{"publish=panic:abc-1", []rule{{point: Publish, action: "panic", id: "abc-1"}}},
		{"publish=sleep:1s:abc-1@4", []rule{{point: Publish, action: "sleep", sleep: time.Second, id: "abc-1", nth: 4}}},
	}
	for _, c := range good {
		got, err := parse(c.spec)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("%q: %d entries, want %d", c.spec, len(got), len(c.want))
			continue
		}
		for i, r := range got {
			w := &c.want[i]
			if r.point != w.point || r.action != w.action || r.sleep != w.sleep || r.id != w.id || r.nth != w.nth {
				t.Errorf("%q entry %d: %s %s %v %q %d, want %s %s %v %q %d", c.spec, i, r.point, r.action, r.sleep, r.id, r.nth, w.point, w.action, w.sleep, w.id, w.nth)
			}
		}
	}

	bad := []struct{ spec, want string }{
		{"kill", `entry "kill": want POINT=ACTION`},
		{"nowhere=kill", `unknown point "nowhere" (known: after_read_before_publish,`},
		{"mid_batch=explode", `unknown action "explode"`},
		{"mid_batch=kill@0", `hit count "0" is not a positive integer`},
		{"mid_batch=kill@x", `hit count "x"`},
		{"mid_batch=sleep", "sleep needs a duration"},
		{"mid_batch=sleep:soon", `sleep duration "soon"`},
		{"mid_batch=sleep:-1s", `sleep duration "-1s"`},
		{"mid_batch=kill:abc", "point mid_batch takes no message id"},
		{"publish=kill:", "empty message id"},
		{"publish=kill:a:b", "too many ':' parts"},
		{"mid_batch=kill;publish=boom", `entry "publish=boom": unknown action`},
	}
	for _, c := range bad {
		_, err := parse(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.spec, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error is not one line", c.spec)
		}
	}
}

func TestSetBadSpecChangesNothing(t *testing.T) {
	set(t, "mid_batch=error")
	if err := Set("mid_batch=nonsense"); err == nil {
		t.Fatal("bad spec accepted")
	}
	if err := Inject(MidBatch); !errors.Is(err, ErrInjected) {
		t.Fatalf("the earlier entries should still fire, got %v", err)
	}
}

func TestInertByDefault(t *testing.T) {
	set(t, "")
	for _, p := range points {
		if err := Inject(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if enabled.Load() {
		t.Fatal("enabled without entries")
	}
}

func TestErrorOnNthHit(t *testing.T) {
	set(t, "before_settle=error@3")
	for i := 1; i <= 5; i++ {
		err := Inject(BeforeSettle)
		if (i == 3) != (err != nil) {
			t.Fatalf("hit %d: %v", i, err)
		}
		if err != nil && (!errors.Is(err, ErrInjected) || !strings.Contains(err.Error(), "before_settle")) {
			t.Fatalf("hit %d: error %q", i, err)
		}
	}
	if err := Inject(MidBatch); err != nil {
		t.Fatalf("another point fired: %v", err)
	}
}

func TestPanic(t *testing.T) {
	set(t, "after_read_before_publish=panic")
	defer func() {
		p := recover()
		if s, _ := p.(string); !strings.Contains(s, "after_read_before_publish") {
			t.Fatalf("recovered %v", p)
		}
	}()
	_ = Inject(AfterReadBeforePublish)
	t.Fatal("did not panic")
}

func TestSleepFiresAndReturnsNil(t *testing.T) {
	set(t, "mid_batch=sleep:1ms")
	for range 3 {
		if err := Inject(MidBatch); err != nil {
			t.Fatal(err)
		}
	}
	if n := rules[MidBatch][0].hits.Load(); n != 3 {
		t.Fatalf("%d hits, want 3", n)
	}
}

func TestPublishFiltersByID(t *testing.T) {
	set(t, "publish=error:m2;publish=error:m4@2")
	var published [][]string
	pub := func(_ context.Context, batch []string) []error {
		published = append(published, append([]string(nil), batch...))
		errs := make([]error, len(batch))
		for i, id := range batch {
			if id == "m3" {
				errs[i] = errors.New("broker said no")
			}
		}
		return errs
	}
	id := func(s string) string { return s }
	errs := PublishBatch(t.Context(), []string{"m1", "m2", "m3", "m4"}, id, nil, pub)
	if !errors.Is(errs[1], ErrInjected) || !strings.Contains(errs[1].Error(), "message m2") {
		t.Fatalf("m2: %v", errs[1])
	}
	if errs[0] != nil || errs[3] != nil || errs[2] == nil || errors.Is(errs[2], ErrInjected) {
		t.Fatalf("results %v", errs)
	}
	if strings.Join(published[0], ",") != "m1,m3,m4" {
		t.Fatalf("published %v", published)
	}
	// m4's entry fires on its second hit only.
	errs = PublishBatch(t.Context(), []string{"m4", "m5"}, id, nil, pub)
	if !errors.Is(errs[0], ErrInjected) || errs[1] != nil {
		t.Fatalf("second round %v", errs)
	}
	errs = PublishBatch(t.Context(), []string{"m4"}, id, nil, pub)
	if errs[0] != nil {
		t.Fatalf("third round %v", errs)
	}
}

// TestPublishFailsTheRestOfAKeysRun: an injected failure fails the later
// messages of its key in the call, as a destination publishing runs
// does, and leaves other keys alone.
func TestPublishFailsTheRestOfAKeysRun(t *testing.T) {
	set(t, "publish=error:a2")
	var published []string
	pub := func(_ context.Context, batch []string) []error {
		published = append(published, batch...)
		return make([]error, len(batch))
	}
	errs := PublishBatch(t.Context(), []string{"a1", "b1", "a2", "b2", "a3", "c1"}, func(s string) string { return s },
		func(s string) string { return s[:1] }, pub)
	for i, want := range []bool{false, false, true, false, true, false} {
		if (errs[i] != nil) != want || (want && !errors.Is(errs[i], ErrInjected)) {
			t.Errorf("result %d: %v, want failed %v", i, errs[i], want)
		}
	}
	if got := strings.Join(published, ","); got != "a1,b1,b2,c1" {
		t.Fatalf("published %s, want a1,b1,b2,c1", got)
	}
}

func TestPublishInertIsPlainCall(t *testing.T) {
	set(t, "")
	calls := 0
	errs := PublishBatch(t.Context(), []int{1, 2}, func(int) string { return "x" }, nil, func(_ context.Context, b []int) []error {
		calls++
		return make([]error, len(b))
	})
	if calls != 1 || len(errs) != 2 {
		t.Fatalf("calls %d, results %d", calls, len(errs))
	}
}

func TestFromEnv(t *testing.T) {
	set(t, "")
	t.Setenv(Env, "mid_batch=bogus")
	err := FromEnv()
	if err == nil || !strings.HasPrefix(err.Error(), "outbox: OUTBOX_FAILPOINTS: entry \"mid_batch=bogus\": unknown action") {
		t.Fatalf("error %v", err)
	}
	t.Setenv(Env, "mid_batch=error@2")
	if err := FromEnv(); err != nil {
		t.Fatal(err)
	}
	_ = Inject(MidBatch)
	// Installing the same value again keeps the hit count: the next hit is
	// the second.
	if err := FromEnv(); err != nil {
		t.Fatal(err)
	}
	if err := Inject(MidBatch); !errors.Is(err, ErrInjected) {
		t.Fatalf("second hit: %v", err)
	}
}

// TestKill runs the test binary as a child that hits a kill point: it
// dies of SIGKILL, and its deferred function never runs.
func TestKill(t *testing.T) {
	if os.Getenv("FAILPOINT_TEST_CHILD") != "" {
		defer os.Stdout.WriteString("deferred ran\n")
		os.Stdout.WriteString("before\n")
		if err := FromEnv(); err != nil {
			t.Fatal(err)
		}
		_ = Inject(AfterPublishBeforeSettle)
		os.Stdout.WriteString("survived\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill$", "-test.v")
	cmd.Env = append(os.Environ(), "FAILPOINT_TEST_CHILD=1", Env+"=after_publish_before_settle=kill")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v (%s)", err, out.String())
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL; stdout %q", err, out.String())
	}
	if !strings.Contains(out.String(), "before") || strings.Contains(out.String(), "survived") || strings.Contains(out.String(), "deferred ran") {
		t.Fatalf("stdout %q", out.String())
	}
	if !strings.Contains(errb.String(), "failpoint after_publish_before_settle: kill") {
		t.Fatalf("stderr %q", errb.String())
	}
}

// BenchmarkInjectInert is the cost of a point while no entry is set.
func BenchmarkInjectInert(b *testing.B) {
	_ = Set("")
	for b.Loop() {
		_ = Inject(AfterPublishBeforeSettle)
	}
}
