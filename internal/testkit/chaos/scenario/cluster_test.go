package scenario_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testnats"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// TestChaosNATSClusterLeaderKilled runs a three-node JetStream cluster
// (nats-server processes of the test's own) with a stream of three
// replicas. An in-process relay publishes to it with the publisher
// `outbox relay --to nats://h1,h2,h3` builds, while a producer commits;
// the stream's leader is SIGKILLed mid-drain (scale × times; the killed
// node is started again before the next kill). Everything committed is
// in the stream, every row marked sent is in it: lost 0, falsely-sent 0.
func TestChaosNATSClusterLeaderKilled(t *testing.T) {
	scale := chaosScale(t)
	cluster := testnats.Start(t, 3)
	_, djs := brokertest.JetStream(t, cluster.URLs(), nats.MaxReconnects(-1))
	ctx := context.Background()
	const stream = "outboxcluster"
	if _, err := djs.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}, Storage: jetstream.FileStorage, Replicas: 3}); err != nil {
		t.Fatalf("create a stream of 3 replicas: %v", err)
	}

	const publishTimeout = 2 * time.Second
	pub, err := outboxurl.Open("nats://"+cluster.Hosts(), &outboxurl.Options{Timeout: publishTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	h := harness.New(t, chaosDrivers[0])
	rec := &chaos.Recorder{}
	l := relayUnderLoad(t, h, rec, outbox.Route{Pattern: "*", Publisher: pub, Destination: stream + ".events"}, publishTimeout)

	kills := scale
	var recovered time.Time
	var slowest time.Duration
	for k := range kills {
		leader := streamLeader(t, djs, stream)
		before := l.confirmed()
		cluster.Node(leader).Kill()
		killed := time.Now()
		relaytest.WaitFor(t, 2*time.Minute, "deliveries flowing after the leader "+leader+" was killed", func() bool { return l.confirmed() > before+200 })
		recovered = time.Now()
		slowest = max(slowest, recovered.Sub(killed))
		next := streamLeader(t, djs, stream)
		t.Logf("kill %d: leader %s SIGKILLed; %s leads; deliveries flowing again %.1fs later", k+1, leader, next, recovered.Sub(killed).Seconds())
		if next == leader {
			t.Errorf("the killed node %s still leads the stream", leader)
		}
		cluster.Node(leader).Restart(t)
		relaytest.WaitFor(t, 2*time.Minute, "three current replicas again", func() bool { return currentReplicas(djs, stream) == 3 })
	}
	if err := l.stopProducing(); err != nil {
		t.Fatalf("producer: %v", err)
	}
	relaytest.WaitFor(t, 3*time.Minute, "every row settled", func() bool { return relaytest.Count(t, h.DB, "pending") == 0 })
	drained := time.Now()
	l.stop()
	readStream(t, djs, stream, rec)
	res := chaosResult{scenario: "stream leader SIGKILLed, 3-node cluster, R3", broker: "NATS JetStream",
		faults: fmt.Sprintf("%d SIGKILL of the stream leader, deliveries again within %.1fs", kills, slowest.Seconds()), recovered: recovered, drained: drained}
	// A publish in flight when its server dies has an unknown outcome and
	// is sent again; JetStream drops what it has by Nats-Msg-Id.
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: kills * outbox.DefaultWorkers * loadBatch}, time.Minute)
}

// streamLeader is the server name of stream's leader, waiting until
// there is one.
func streamLeader(t *testing.T, js jetstream.JetStream, stream string) string {
	t.Helper()
	var leader string
	relaytest.WaitFor(t, time.Minute, "a leader for "+stream, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
			return false
		}
		leader = info.Cluster.Leader
		return true
	})
	return leader
}

// currentReplicas counts the stream's leader and its current replicas.
func currentReplicas(js jetstream.JetStream, stream string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		return 0
	}
	n := 1
	for _, p := range info.Cluster.Replicas {
		if p.Current {
			n++
		}
	}
	return n
}

// TestChaosKafkaLeadershipMoves runs kfake with three brokers and a topic
// of 8 partitions; an in-process relay publishes to it with the
// publisher `outbox relay --to kafka://b1,b2,b3` builds while a producer
// commits, and the leadership of every partition moves to another broker
// 5 × scale times during the drain. Lost 0, falsely-sent 0 (every row
// marked sent is in the topic), inversions 0.
func TestChaosKafkaLeadershipMoves(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	k, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(kafkaPartitions, kafkaTopic))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	defer k.Close()
	addrs := k.ListenAddrs()
	const publishTimeout = 3 * time.Second
	pub, err := outboxurl.Open("kafka://"+strings.Join(addrs, ","), &outboxurl.Options{Timeout: publishTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	h := harness.New(t, chaosDrivers[0])
	rec := &chaos.Recorder{}
	l := relayUnderLoad(t, h, rec, outbox.Route{Pattern: "*", Publisher: pub}, publishTimeout)

	moves := 5 * scale
	var recovered time.Time
	var slowest time.Duration
	for m := range moves {
		time.Sleep(time.Duration(200+rnd.IntN(600)) * time.Millisecond)
		before := l.confirmed()
		for p := range int32(kafkaPartitions) {
			now := k.LeaderFor(kafkaTopic, p)
			to := (now + 1 + int32(rnd.IntN(2))) % 3
			if err := k.MoveTopicPartition(kafkaTopic, p, to); err != nil {
				t.Fatalf("move %s/%d to broker %d: %v", kafkaTopic, p, to, err)
			}
			if got := k.LeaderFor(kafkaTopic, p); got != to {
				t.Fatalf("%s/%d: leader %d after the move to %d", kafkaTopic, p, got, to)
			}
		}
		moved := time.Now()
		relaytest.WaitFor(t, 2*time.Minute, fmt.Sprintf("deliveries flowing after move %d", m+1), func() bool { return l.confirmed() > before+100 })
		recovered = time.Now()
		slowest = max(slowest, recovered.Sub(moved))
		t.Logf("move %d: every partition's leader moved; deliveries flowing %.1fs later", m+1, recovered.Sub(moved).Seconds())
	}
	if err := l.stopProducing(); err != nil {
		t.Fatalf("producer: %v", err)
	}
	relaytest.WaitFor(t, 3*time.Minute, "every row settled", func() bool { return relaytest.Count(t, h.DB, "pending") == 0 })
	drained := time.Now()
	l.stop()
	n := readKafkaTopic(t, addrs, kafkaTopic, rec)
	t.Logf("%d records in %s", n, kafkaTopic)
	res := chaosResult{scenario: "partition leadership moved, 3 brokers", broker: "Kafka (kfake)",
		faults: fmt.Sprintf("%d moves of all %d partitions' leaders, deliveries again within %.1fs", moves, kafkaPartitions, slowest.Seconds()), recovered: recovered, drained: drained}
	// A produce answered NOT_LEADER is retried by the client; a record
	// whose outcome was unknown is sent again: at most a round per worker
	// per move.
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: moves * outbox.DefaultWorkers * loadBatch}, time.Minute)
}
