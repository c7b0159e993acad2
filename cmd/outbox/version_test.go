package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVersionFromBuildInfo builds the outbox command the two ways users
// do, from a clean clone of the commit under test, and checks that
// 'outbox version' and 'outbox --version' report that commit, its time
// and the module version the toolchain derived from it: 'go build' in the
// clone, then 'go install' into a temporary GOBIN after a change to the
// work tree, which must show as modified.
func TestVersionFromBuildInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the outbox command: -short")
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("git %s: %v", strings.Join(args, " "), err)
			}
			t.Skipf("needs the source as a git clone (git %s: %v)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	root := git(".", "rev-parse", "--show-toplevel")
	head := git(root, "rev-parse", "HEAD")
	committed, err := time.Parse(time.RFC3339, git(root, "log", "-1", "--format=%cI", "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	when := committed.UTC().Format(time.RFC3339)
	// A clone of exactly HEAD: the toolchain stamps a plain checkout (not
	// every work tree layout), and the clone has no local changes.
	src := filepath.Join(t.TempDir(), "src")
	git(root, "clone", "--quiet", "--shared", "--no-checkout", git(root, "rev-parse", "--path-format=absolute", "--git-common-dir"), src)
	git(src, "checkout", "--quiet", "--detach", head)

	goCmd := func(env []string, args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = src
		// The VCS stamp is on by default; make sure no GOFLAGS turns it off.
		cmd.Env = append(os.Environ(), append(env, "GOFLAGS=-buildvcs=true")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	version := func(bin string) string {
		t.Helper()
		var lines []string
		for _, arg := range []string{"version", "--version"} {
			out, err := exec.Command(bin, arg).Output()
			if err != nil {
				t.Fatalf("%s %s: %v", bin, arg, err)
			}
			lines = append(lines, strings.TrimSpace(string(out)))
		}
		if lines[0] != lines[1] {
			t.Errorf("version %q and --version %q differ", lines[0], lines[1])
		}
		return lines[0]
	}

	built := filepath.Join(t.TempDir(), "outbox")
	goCmd(nil, "build", "-o", built, "./cmd/outbox")
	v := version(built)
	if want := " (commit " + head + ", " + when + "; go"; !strings.Contains(v, want) {
		t.Errorf("go build: %q, want it to contain %q", v, want)
	}
	// The module version is the tag, or a pseudo-version naming the commit.
	if mod := strings.Fields(v)[1]; !strings.HasPrefix(mod, "v") || (!strings.Contains(mod, head[:12]) && git(src, "tag", "--points-at", head) == "") {
		t.Errorf("go build: module version %q names neither the commit %s nor a tag", mod, head[:12])
	}

	readme := filepath.Join(src, "README.md")
	f, err := os.OpenFile(readme, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("\nlocal change\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	gobin := t.TempDir()
	goCmd([]string{"GOBIN=" + gobin}, "install", "./cmd/outbox")
	v = version(filepath.Join(gobin, "outbox"))
	if want := " (commit " + head + ", " + when + ", modified; go"; !strings.Contains(v, want) {
		t.Errorf("go install with a local change: %q, want it to contain %q", v, want)
	}
}
