//go:build outbox_failpoints

package scenario_test

// The scenarios that inject their faults through failpoints: relay
// processes killed at a point of their round (webhook and Kafka), a
// message whose publish panics or kills the relay, an error at each step
// of an in-process relay. Failpoints exist only in builds with the tag
// outbox_failpoints, so these do too: `go test -tags outbox_failpoints`
// builds the test binary, and the relay processes it re-executes, with
// them.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
)

// startFaultyChild is startChild with OUTBOX_FAILPOINTS set to spec for
// that relay process only.
func startFaultyChild(t *testing.T, h *harness.Harness, sinkURL, id, spec string, batch int, ttl time.Duration) *child {
	t.Helper()
	return startChild(t, h.DB.URL, sinkURL, id, batch, ttl, failpoint.Env+"="+spec)
}

// killDrivers are the databases the kill scenarios run on: SQLite too,
// whose file relay processes share.
var killDrivers = append(slices.Clone(chaosDrivers), harness.Case{Name: "sqlite", Dialect: store.SQLite})

// poisonAmong commits n good messages over 10 keys, then one poison
// message (key "poison", maxAttempts attempts), then n more, recording
// them all in rec, and returns the poison message's id.
func poisonAmong(t *testing.T, h *harness.Harness, rec *chaos.Recorder, n, maxAttempts int) string {
	t.Helper()
	p := &chaosProducer{h: h, rec: rec}
	p.backlog(t, "a", n, 10)
	poison, err := h.Enqueue(context.Background(), []outbox.Message{{Topic: "chaos.event", Key: "poison", Payload: []byte(`{}`), MaxAttempts: maxAttempts}}, false)
	if err != nil {
		t.Fatal(err)
	}
	rec.Commit(poison, []string{"poison"})
	p.backlog(t, "b", n, 10)
	return poison[0]
}

// waitFailpointKill waits up to two minutes for the relay process c to
// reach the failpoint of spec and fails the test unless that failpoint's
// SIGKILL ended it.
func waitFailpointKill(t *testing.T, c *child, spec string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: the relay never reached the failpoint", spec)
	}
	if !c.KilledBy(syscall.SIGKILL) {
		t.Fatalf("%s: relay ended with %v, not by the failpoint's SIGKILL", spec, c.State())
	}
}

// killAtFailpoint runs kills relay processes to dest one after another,
// each killed (waitFailpointKill) by the failpoint point at one of its
// first five passes, chosen with rnd; then it starts the relay that
// drains the rest, without failpoints. id names them: id-0, id-1…,
// id-last.
func killAtFailpoint(t *testing.T, h *harness.Harness, rnd *rand.Rand, dest, id, point string, kills, batch int) *child {
	t.Helper()
	for k := range kills {
		spec := fmt.Sprintf("%s=kill@%d", point, 1+rnd.IntN(5))
		waitFailpointKill(t, startFaultyChild(t, h, dest, fmt.Sprintf("%s-%d", id, k), spec, batch, time.Second), spec)
	}
	return startFaultyChild(t, h, dest, id+"-last", "", batch, time.Second)
}

// TestChaosKillAtFailpoints kills relay processes at each failpoint of a
// round, several times during a drain, on PostgreSQL and MariaDB:
// nothing is lost, no row claims a delivery that did not happen, and
// each kill costs at most the batches in flight.
func TestChaosKillAtFailpoints(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	const batch, kills = 100, 3
	for _, dc := range killDrivers {
		if snapshotRead() && dc.Dialect != store.Postgres {
			continue // the same scenario as on the table read
		}
		for _, point := range []string{failpoint.AfterReadBeforePublish, failpoint.AfterPublishBeforeSettle, failpoint.MidBatch} {
			t.Run(dc.Name+"/"+point, func(t *testing.T) {
				h := harness.New(t, dc)
				rec := &chaos.Recorder{}
				(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 1500*scale, 10)
				sink := newChaosSink(t, rec)
				last := killAtFailpoint(t, h, rnd, sink.URL(), "fp", point, kills, batch)
				res := chaosResult{scenario: "kill at " + point, broker: "webhook", faults: fmt.Sprintf("%d SIGKILL", kills), recovered: time.Now()}
				drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: kills * childWorkers * batch}, 3*time.Minute)
				last.Term(t)
			})
		}
	}
}

// TestChaosPoisonPanicQuarantined: a message whose publish panics (the
// failpoint publish=panic:<id>, every time) among a backlog does not
// crash-loop the relay: the process stays up, the message goes dead after
// its max_attempts with the panic as its reason, everything else arrives.
func TestChaosPoisonPanicQuarantined(t *testing.T) {
	scale := chaosScale(t)
	eachDriver(t, func(t *testing.T, dc harness.Case, h *harness.Harness, rec *chaos.Recorder) {
		poison := poisonAmong(t, h, rec, 500*scale, 3)
		sink := newChaosSink(t, rec)
		c := startFaultyChild(t, h, sink.URL(), "poison", failpoint.Publish+"=panic:"+poison, 100, time.Second)
		res := chaosResult{scenario: "publish panics on one message", broker: "webhook", faults: "panic on every attempt", recovered: time.Now()}
		rep := drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDead: 1}, 3*time.Minute)
		assertRunning(t, c, "instead of containing the panic")
		if rep.Dead != 1 {
			t.Errorf("want exactly the poison message dead and undelivered: %s", rep)
		}
		status, attempts, lastErr := messageRow(t, h, poison)
		if status != "dead" || attempts != 3 || !strings.Contains(lastErr, "publisher panicked") {
			t.Errorf("poison message: %s after %d attempts: %q", status, attempts, lastErr)
		}
		c.Term(t)
	})
}

// TestChaosPoisonKillQuarantined: a message whose publish kills the relay
// process outright (the failpoint publish=kill:<id>: SIGKILL, which no
// recover catches) among a backlog. A supervisor restarts the relay, with
// the same id, each time it dies. The relays narrow the crashed batch down
// by halves, publish the culprit alone with its attempt recorded first,
// and after max_attempts such crashes mark it dead: the crash loop ends
// by itself, everything else arrives, and no innocent message is charged
// more than the one attempt that delivered it.
func TestChaosPoisonKillQuarantined(t *testing.T) {
	testKillQuarantined(t, failpoint.Publish, "poison-kill", "publish kills the relay on one message")
}

// TestChaosKafkaKills is TestChaosKillAtFailpoints with Kafka as the
// destination: relay processes publishing to kfake are SIGKILLed at a
// failpoint of their round three times during a drain, then a relay
// drains the rest. The deliveries are the whole topic, read to its high
// watermarks. Kafka keeps every write, so each kill's cost shows up as
// duplicates, at most the batches in flight.
func TestChaosKafkaKills(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	const batch, kills = 100, 3
	for _, dc := range chaosDrivers {
		for _, point := range []string{failpoint.AfterReadBeforePublish, failpoint.AfterPublishBeforeSettle} {
			t.Run(dc.Name+"/"+point, func(t *testing.T) {
				k := startKfake(t, kfake.SeedTopics(kafkaPartitions, kafkaTopic))
				dest := "kafka://" + strings.Join(k.ListenAddrs(), ",")
				h := harness.New(t, dc)
				rec := &chaos.Recorder{}
				(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 1500*scale, 20)
				last := killAtFailpoint(t, h, rnd, dest, "kk", point, kills, batch)
				recovered := time.Now()
				relaytest.WaitFor(t, 3*time.Minute, "every row settled", func() bool {
					return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE "+h.DB.Status()+" = 'pending'") == 0
				})
				drained := time.Now()
				last.Term(t)
				n := readKafkaTopic(t, k.ListenAddrs(), kafkaTopic, rec)
				t.Logf("%d records in %s", n, kafkaTopic)
				res := chaosResult{scenario: "kill at " + point, broker: "Kafka (kfake)", faults: fmt.Sprintf("%d SIGKILL", kills), recovered: recovered, drained: drained}
				drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: kills * childWorkers * batch}, time.Minute)
			})
		}
	}
}

// TestChaosInjectedErrors fails each step of a round once, in process,
// through failpoints set with failpoint.Set: a failed read round, a
// message whose publish fails, a batch abandoned between waves and a
// failed settle. Each costs at most a retry or a redelivery of the batch.
func TestChaosInjectedErrors(t *testing.T) {
	scale := chaosScale(t)
	eachDriver(t, func(t *testing.T, dc harness.Case, h *harness.Harness, rec *chaos.Recorder) {
		(&chaosProducer{h: h, rec: rec}).backlog(t, "k", 2000*scale, 10)
		spec := "after_read_before_publish=error@2;mid_batch=error@3;publish=error@50;before_settle=error@4;after_publish_before_settle=sleep:10ms@5"
		if err := failpoint.Set(spec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = failpoint.Set("") })
		const batch = 100
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
			rec.Deliver(env.ID, env.Key)
			return nil
		})})
		cfg.BatchSize = batch
		cfg.Workers = 1
		r, err := h.NewRelay(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		stop := relaytest.Run(t, r)
		res := chaosResult{scenario: "an injected error at each step", broker: "in-process", faults: spec, recovered: start}
		// Only the failed settle redelivers: one batch.
		drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: batch}, 2*time.Minute)
		stop()
		if h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE last_error LIKE '%injected fault%'") == 0 {
			t.Fatal("no message was retried after the injected publish error")
		}
	})
}
