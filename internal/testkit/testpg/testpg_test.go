package testpg

import (
	"os"
	"testing"
)

// TestSQLFromAPrivateDirectory: a server starts and answers a query with
// exactly its result while the test runs in a directory only its own
// user may enter (a clone in a private home or a mktemp directory, tests
// run as root): the programs run as the postgres account start elsewhere,
// and nothing psql says on stderr is part of the result.
func TestSQLFromAPrivateDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	s := Start(t)
	if got := s.SQL(t, "SELECT 1"); got != "1" {
		t.Fatalf("SELECT 1 = %q, want 1", got)
	}
	sb := s.Standby(t, "standby1", false)
	if got := sb.SQL(t, "SELECT pg_is_in_recovery()"); got != "t" {
		t.Fatalf("standby: pg_is_in_recovery() = %q, want t", got)
	}
}
