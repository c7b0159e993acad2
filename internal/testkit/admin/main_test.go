package admin_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestMain(m *testing.M) {
	testdb.VerifyNoLeaks(m,
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}
