package outboxmqtt_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMain checks that no test leaves a goroutine behind: a closed
// publisher has stopped its connection manager.
func TestMain(m *testing.M) {
	testdb.VerifyNoLeaks(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}
