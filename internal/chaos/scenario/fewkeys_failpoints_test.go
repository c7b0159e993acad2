//go:build outbox_failpoints

package scenario_test

// Few keys under faults: the kill scenarios with a backlog of one key and
// of three, so that a batch is many waves of a few keys, published in
// lanes; and a failure in the middle of a one-key run.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/harness"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
)

// TestChaosKillAtFailpointsFewKeys is TestChaosKillAtFailpoints with one
// key and with three: nothing lost, no inversion after dedupe, each kill
// costs at most the batches in flight.
func TestChaosKillAtFailpointsFewKeys(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	const batch, kills = 100, 3
	for _, dc := range chaosDrivers {
		for _, keys := range []int{1, 3} {
			for _, point := range []string{failpoint.AfterReadBeforePublish, failpoint.AfterPublishBeforeSettle, failpoint.MidBatch} {
				t.Run(fmt.Sprintf("%s/%d-keys/%s", dc.Name, keys, point), func(t *testing.T) {
					h := harness.New(t, dc)
					rec := &chaos.Recorder{}
					(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 600*scale, keys)
					sink := newChaosSink(t, rec)
					for k := range kills {
						spec := fmt.Sprintf("%s=kill@%d", point, 1+rnd.IntN(5))
						waitFailpointKill(t, startFaultyChild(t, h, sink.URL(), fmt.Sprintf("fk-%d", k), spec, batch, time.Second), spec)
					}
					last := startFaultyChild(t, h, sink.URL(), "fk-last", "", batch, time.Second)
					res := chaosResult{scenario: fmt.Sprintf("kill at %s, %d keys", point, keys), broker: "webhook", faults: fmt.Sprintf("%d SIGKILL", kills), recovered: time.Now()}
					drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: kills * childWorkers * batch}, 3*time.Minute)
					last.Term(t)
				})
			}
		}
	}
}

// TestChaosFailureMidRunOneKey: one key, a message in the middle of its
// backlog fails its first publish, and relays are killed after publishing
// before settling: the failed message is retried before anything behind
// it arrives (no inversion after dedupe), and nothing is lost.
func TestChaosFailureMidRunOneKey(t *testing.T) {
	scale := chaosScale(t)
	const batch, kills = 100, 2
	for _, dc := range chaosDrivers {
		t.Run(dc.Name, func(t *testing.T) {
			h := harness.New(t, dc)
			rec := &chaos.Recorder{}
			(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 600*scale, 1)
			ids := tableIDs(t, h)
			mid := ids[len(ids)/2]
			sink := newChaosSink(t, rec)
			// In every process the first publish of mid fails; the first
			// processes are killed after a later publish.
			failMid := failpoint.Publish + "=error:" + mid + "@1"
			for k := range kills {
				spec := fmt.Sprintf("%s=kill@%d;%s", failpoint.AfterPublishBeforeSettle, 3+2*k, failMid)
				waitFailpointKill(t, startFaultyChild(t, h, sink.URL(), fmt.Sprintf("mr-%d", k), spec, batch, time.Second), spec)
			}
			last := startFaultyChild(t, h, sink.URL(), "mr-last", failMid, batch, time.Second)
			res := chaosResult{scenario: "failure mid-run, one key", broker: "webhook", faults: fmt.Sprintf("1 failed publish, %d SIGKILL", kills), recovered: time.Now()}
			drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: kills * childWorkers * batch}, 3*time.Minute)
			last.Term(t)
			if status, attempts, _ := messageRow(t, h, mid); status != "sent" || attempts < 2 {
				t.Errorf("the message whose publish failed: %s after %d attempts, want sent after a retry", status, attempts)
			}
		})
	}
}

// TestChaosKafkaKillsOneKey is TestChaosKafkaKills with a single key: one
// Kafka partition holds the whole run.
func TestChaosKafkaKillsOneKey(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	const batch, kills = 100, 3
	dc := chaosDrivers[0]
	for _, point := range []string{failpoint.AfterPublishBeforeSettle, failpoint.MidBatch} {
		t.Run(dc.Name+"/"+point, func(t *testing.T) {
			k := startKfake(t, kfake.SeedTopics(kafkaPartitions, kafkaTopic))
			dest := "kafka://" + strings.Join(k.ListenAddrs(), ",")
			h := harness.New(t, dc)
			rec := &chaos.Recorder{}
			(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 600*scale, 1)
			for n := range kills {
				spec := fmt.Sprintf("%s=kill@%d", point, 1+rnd.IntN(5))
				waitFailpointKill(t, startFaultyChild(t, h, dest, fmt.Sprintf("k1-%d", n), spec, batch, time.Second), spec)
			}
			last := startFaultyChild(t, h, dest, "k1-last", "", batch, time.Second)
			recovered := time.Now()
			relaytest.WaitFor(t, 3*time.Minute, "every row settled", func() bool {
				return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending'") == 0
			})
			drained := time.Now()
			last.Term(t)
			readKafkaTopic(t, k.ListenAddrs(), kafkaTopic, rec)
			res := chaosResult{scenario: "kill at " + point + ", one key", broker: "Kafka (kfake)", faults: fmt.Sprintf("%d SIGKILL", kills), recovered: recovered, drained: drained}
			drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: kills * childWorkers * batch}, time.Minute)
		})
	}
}

// tableIDs is every message id in the outbox, in id order.
func tableIDs(t *testing.T, h *harness.Harness) []string {
	t.Helper()
	q := "SELECT message_id FROM outbox_messages ORDER BY id"
	if h.DB.Dialect == store.Postgres {
		q = "SELECT message_id::text FROM outbox_messages ORDER BY id"
	}
	rows, err := h.DB.SQL.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}
