package outbox_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run if a test leaves a goroutine behind
// (the pools' own background goroutines excepted).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
