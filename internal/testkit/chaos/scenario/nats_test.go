package scenario_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxnats"
)

// TestChaosNATSFaults is TestChaosDestinationFaults against NATS
// JetStream: the relay's connection goes through the fault proxy, the
// deliveries are what the stream holds at the end, in stream order.
// JetStream drops a message whose Nats-Msg-Id it has seen within its
// duplicate window, so duplicates are counted after that dedupe.
func TestChaosNATSFaults(t *testing.T) {
	_, djs := brokertest.JetStream(t, brokertest.NATSURL)
	ctx := context.Background()
	stream := testdb.RandomName("outboxchaos_")
	if _, err := djs.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = djs.DeleteStream(context.Background(), stream) }()

	proxy, _ := proxyURL(t, brokertest.NATSURL, nats.DefaultPort)
	// Publishing while disconnected fails at once instead of buffering,
	// and a stale connection is noticed within seconds.
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.Timeout(2*time.Second), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.ReconnectBufSize(-1), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	h, rec, res := brokerFaults(t, proxy, pub, stream+".events", "NATS JetStream")

	readStream(t, djs, stream, rec)
	drainAndCheck(t, h, rec, res, chaos.Bounds{MaxDuplicates: chaos.Unbounded}, time.Minute)
}

// readStream records in rec every message of stream, in stream order:
// what the stream holds is what was delivered.
func readStream(t *testing.T, js jetstream.JetStream, stream string, rec *chaos.Recorder) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// An ordered consumer of a cluster whose leader changed may fail a
	// fetch, or come back empty, for a few seconds while it re-creates
	// itself: only a whole minute without a message ends the read.
	progress := time.Now()
	for read := uint64(0); read < info.State.Msgs; {
		got := 0
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err == nil {
			for m := range batch.Messages() {
				rec.Deliver(m.Headers().Get("Nats-Msg-Id"), m.Headers().Get("outbox-business-key"))
				got++
			}
		}
		if got > 0 {
			progress = time.Now()
		} else if time.Since(progress) > time.Minute {
			t.Fatalf("read %d of the stream's %d messages; none for a minute (last fetch: %v)", read, info.State.Msgs, err)
		} else if err != nil {
			time.Sleep(200 * time.Millisecond)
		}
		read += uint64(got)
	}
}
