package outbox_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMain fails the package's run if a test leaves a goroutine behind
// (the pools' own background goroutines excepted).
func TestMain(m *testing.M) {
	testdb.VerifyNoLeaks(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}
