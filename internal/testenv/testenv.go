// Package testenv is what every test of the project asks of its
// environment: overridable service addresses, and a service or program
// that is missing, which fails the test when CI=true and skips it
// elsewhere, saying why. It uses the standard library only, so that the
// tests of the outbox module itself can use it.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Env is the environment variable k, or def when k is unset or empty:
// the tests' service addresses are overridden this way.
func Env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Unavailable fails the test in CI and skips it elsewhere.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not reachable (CI=true, so this fails): %v", what, err)
	}
	t.Skipf("skipping outside CI: %s is not reachable: %v", what, err)
}

// Command finds the program name a test runs (env, when set, names it
// instead), failing the test in CI and skipping it elsewhere when it is
// missing; install says how to get it.
func Command(t testing.TB, name, env, install string) string {
	t.Helper()
	if env != "" {
		if p := os.Getenv(env); p != "" {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (CI=true, so this fails; %s): %v", name, install, err)
	}
	t.Skipf("skipping outside CI: %s is not installed (%s): %v", name, install, err)
	return ""
}
