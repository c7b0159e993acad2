package outboxkafka_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMain checks that no test leaves a goroutine behind: Close releases
// the client and everything it started.
func TestMain(m *testing.M) {
	testdb.VerifyNoLeaks(m)
}
