//go:build outbox_failpoints

package scenario_test

// Few keys under faults: the kill scenarios with a backlog of one key and
// of three, so that a batch is many waves of a few keys, published in
// lanes; and a failure in the middle of a one-key run.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/kafkatest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
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
					last := killAtFailpoint(t, h, rnd, sink.URL(), "fk", point, kills, batch)
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
	eachDriver(t, func(t *testing.T, _ harness.Case, h *harness.Harness, rec *chaos.Recorder) {
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

// TestChaosKafkaKillsOneKey is TestChaosKafkaKills with a single key: one
// Kafka partition holds the whole run, and the relay publishes a batch's
// run of that key in one call. Relays are killed at every failpoint a
// route taking runs reaches (mid_batch, between two waves of a batch, is
// not one: every key's run is in the first wave), publish as the message
// in the middle of the backlog is about to go out with its run.
func TestChaosKafkaKillsOneKey(t *testing.T) {
	rnd := chaosRand(t)
	for _, point := range []string{failpoint.AfterReadBeforePublish, failpoint.AfterPublishBeforeSettle, failpoint.BeforeSettle, failpoint.Publish} {
		t.Run(chaosDrivers[0].Name+"/"+point, func(t *testing.T) {
			k := startKfake(t, kfake.SeedTopics(kafkaPartitions, kafkaTopic))
			kafkaOneKey(t, k, "kill at "+point+", one key", "3 SIGKILL", func(h *harness.Harness, n int) string {
				switch {
				case n == 3:
					return ""
				case point == failpoint.Publish:
					ids := tableIDs(t, h)
					return fmt.Sprintf("%s=kill:%s", point, ids[len(ids)/2+n])
				}
				return fmt.Sprintf("%s=kill@%d", point, 1+rnd.IntN(5))
			})
		})
	}
}

// TestChaosKafkaFailureMidRunOneKey: one key to a topic whose
// max.message.bytes makes every run of 100 several record batches; the
// broker fails every fifth produce request, a message in the middle of
// the backlog fails its first publish, and relays are killed after
// publishing before settling. What failed is retried before anything
// behind it lands for good: after dedupe no inversion, nothing lost.
func TestChaosKafkaFailureMidRunOneKey(t *testing.T) {
	k := startKfake(t)
	createSmallTopic(t, k, kafkaTopic, 4096)
	var produces atomic.Int32
	k.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if produces.Add(1)%5 == 0 {
			return kafkatest.FailProduce(req, kerr.PolicyViolation.Code), nil, true
		}
		return nil, nil, false
	})
	var failMid, mid string
	h := kafkaOneKey(t, k, "failures mid-run, one key", "every 5th produce request failed, 1 failed publish, 2 SIGKILL", func(h *harness.Harness, n int) string {
		if failMid == "" {
			ids := tableIDs(t, h)
			mid = ids[len(ids)/2]
			failMid = failpoint.Publish + "=error:" + mid + "@1"
		}
		if n < 2 {
			return fmt.Sprintf("%s=kill@%d;%s", failpoint.AfterPublishBeforeSettle, 3+2*n, failMid)
		}
		return failMid
	})
	if produces.Load() < 5 {
		t.Fatalf("%d produce requests: none was failed", produces.Load())
	}
	// Its failure is recorded, though not always as an attempt of its
	// own: a run cut short by a broker failure before it, in the call
	// where its publish failed, holds it back uncharged.
	if status, attempts, lastErr := messageRow(t, h, mid); status != "sent" || lastErr == "" {
		t.Errorf("the message whose publish failed: %s after %d attempts, last error %q; want sent after a recorded failure", status, attempts, lastErr)
	}
	var retried int
	if err := h.DB.SQL.QueryRow("SELECT count(*) FROM outbox_messages WHERE attempts > 1").Scan(&retried); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d produce requests; %d messages needed more than one attempt", produces.Load(), retried)
}

// TestChaosKafkaRelaysShareOneKey: three relay processes at once over a
// one-key backlog to Kafka (the key's partition leased by one of them at
// a time, its runs in one call), the one holding it SIGKILLed midway by a
// kill at after_publish_before_settle, a fourth started in its place:
// lost 0, no inversion after dedupe.
func TestChaosKafkaRelaysShareOneKey(t *testing.T) {
	k := startKfake(t, kfake.SeedTopics(kafkaPartitions, kafkaTopic))
	scale := chaosScale(t)
	const batch = 100
	dest := "kafka://" + strings.Join(k.ListenAddrs(), ",")
	h := harness.New(t, chaosDrivers[0])
	rec := &chaos.Recorder{}
	total := 1500 * scale
	(&chaosProducer{h: h, rec: rec}).backlog(t, "k", total, 1)
	// Each process dies when it first settles after publishing its third
	// batch; only the one holding the key's partition ever gets there.
	spec := failpoint.AfterPublishBeforeSettle + "=kill@3"
	var relays []*child
	for n := range 3 {
		relays = append(relays, startFaultyChild(t, h, dest, fmt.Sprintf("share-%d", n), spec, batch, time.Second))
	}
	killed := -1
	relaytest.WaitFor(t, 2*time.Minute, "a relay killed at the failpoint", func() bool {
		for i, c := range relays {
			if c.Exited() {
				killed = i
				return true
			}
		}
		return false
	})
	if !relays[killed].KilledBy(syscall.SIGKILL) {
		t.Fatalf("relay %d exited without the kill: %v", killed, relays[killed].State())
	}
	relays[killed] = startFaultyChild(t, h, dest, "share-heir", "", batch, time.Second)
	recovered := time.Now()
	relaytest.WaitFor(t, 3*time.Minute, "every row settled", func() bool {
		return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE "+h.DB.Status()+" = 'pending'") == 0
	})
	drained := time.Now()
	for _, c := range relays {
		if c.Exited() {
			continue // a second holder of the key met the failpoint too
		}
		c.Term(t)
	}
	readKafkaTopic(t, k.ListenAddrs(), kafkaTopic, rec)
	res := chaosResult{scenario: "three relays share one key", broker: "Kafka (kfake)", faults: "SIGKILL of the key's holder", recovered: recovered, drained: drained}
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: 3 * childWorkers * batch}, time.Minute)
}

// kafkaOneKey runs relay processes one after another over a one-key
// backlog to the Kafka topic: spec(h, n) is the failpoints of the nth
// process; a spec with a kill is waited for, "" (or one without kill)
// starts the process that drains, and "-" ends the list. Then it checks
// the topic against what was committed, and returns the harness.
func kafkaOneKey(t *testing.T, k *kfake.Cluster, scenario, faults string, spec func(h *harness.Harness, n int) string) *harness.Harness {
	t.Helper()
	scale := chaosScale(t)
	const batch = 100
	dest := "kafka://" + strings.Join(k.ListenAddrs(), ",")
	h := harness.New(t, chaosDrivers[0])
	rec := &chaos.Recorder{}
	(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 600*scale, 1)
	kills := 0
	var last *child
	for n := 0; ; n++ {
		sp := spec(h, n)
		if sp == "-" {
			break
		}
		c := startFaultyChild(t, h, dest, fmt.Sprintf("k1-%d", n), sp, batch, time.Second)
		if !strings.Contains(sp, "=kill") {
			last = c
			break
		}
		kills++
		waitFailpointKill(t, c, sp)
	}
	recovered := time.Now()
	relaytest.WaitFor(t, 3*time.Minute, "every row settled", func() bool {
		return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE "+h.DB.Status()+" = 'pending'") == 0
	})
	drained := time.Now()
	last.Term(t)
	readKafkaTopic(t, k.ListenAddrs(), kafkaTopic, rec)
	res := chaosResult{scenario: scenario, broker: "Kafka (kfake)", faults: faults, recovered: recovered, drained: drained}
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: max(kills, 1) * childWorkers * batch}, time.Minute)
	return h
}

// createSmallTopic creates topic on k with kafkaPartitions partitions and
// the given max.message.bytes.
func createSmallTopic(t *testing.T, k *kfake.Cluster, topic string, maxBytes int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	limit := strconv.Itoa(maxBytes)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, kafkaPartitions, 1, map[string]*string{"max.message.bytes": &limit}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
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
