//go:build outbox_failpoints

package scenario_test

import "testing"

// TestChaosSnapshotRead runs scenarios of the suite on PostgreSQL with
// the snapshot read (docs/snapshot-read.md): relay processes killed at
// every failpoint of their round, a message whose publish kills them,
// random kills while producers commit and roll back, writers committing
// out of id order, the database crash-restarted, and a failover to a
// synchronous and to an asynchronous standby. The whole suite runs on it
// with OUTBOX_TEST_READ_PATH=snapshot (this test then runs its scenarios
// a second time).
func TestChaosSnapshotRead(t *testing.T) {
	t.Setenv("OUTBOX_TEST_READ_PATH", "snapshot")
	for _, s := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"kill at failpoints", TestChaosKillAtFailpoints},
		{"poison kill", TestChaosPoisonKillQuarantined},
		{"random kills with producers", TestChaosRandomKillsWithProducers},
		{"writers out of id order", TestChaosWritersCommitOutOfIDOrder},
		{"database restart", TestChaosDatabaseRestart},
		{"failover", TestChaosFailover},
	} {
		t.Run(s.name, s.run)
	}
}
