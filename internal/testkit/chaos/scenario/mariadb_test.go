package scenario_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testmariadb"
)

// TestChaosMariaDBRestart is TestChaosDatabaseRestart on MariaDB: a
// private server on a spare port is SIGKILLed and started again on the
// same data directory under a relay process and writers. Once it is back,
// everything committed arrives and no row is falsely sent. Commits cut by
// a kill are uncertain.
func TestChaosMariaDBRestart(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	my := testmariadb.Start(t)
	saved := testdb.MySQLURL
	testdb.MySQLURL = my.URL
	dc := chaosDrivers[1]
	h := harness.New(t, dc)
	testdb.MySQLURL = saved

	restartUnderLoad(t, h, dc, rnd, 2*scale, "database SIGKILLed and restarted", "restarts (SIGKILL)", func() {
		my.Kill(t)
		my.Restart(t)
	})
}
