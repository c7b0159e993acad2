package relaytest_test

import (
	"os"
	"testing"

	"github.com/txoutbox/outbox/internal/testkit/relaytest"
)

func TestMain(m *testing.M) { os.Exit(relaytest.Main(m)) }
