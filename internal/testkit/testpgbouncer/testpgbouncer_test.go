package testpgbouncer

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox/internal/testkit/testpg"
)

// TestStartFromAPrivateDirectory: PgBouncer starts and passes a query
// through to its server while the test runs in a directory only its own
// user may enter (tests run as root start it as the postgres account).
func TestStartFromAPrivateDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	s := testpg.Start(t)
	b := Start(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil || n != 1 {
		t.Fatalf("SELECT 1 through PgBouncer: %d, %v", n, err)
	}
}
