package outboxkinesis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxkinesis"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// target is the local Kinesis server: each destination is a fresh stream
// of two shards, read back shard by shard, or by Consume. The
// publisher's client goes through a fault proxy, so that its connection
// can be cut. A missing stream is unavailable, not permanent (the route
// waits for it); a name Kinesis refuses is the bad destination.
func target(t *testing.T) *brokertest.Target {
	admin := local(t)
	proxy := faultproxy.Start(t, strings.TrimPrefix(endpoint, "http://"))
	p, err := outboxkinesis.New(newClient(t, "http://"+proxy.Addr(), nil, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &brokertest.Target{
		Target: publishertest.Target{
			Publisher:      p,
			NewDestination: func(t *testing.T) string { return newStream(t, admin, 2) },
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				var out []publishertest.Received
				for _, r := range waitRecords(t, admin, dest, n, 20*time.Second)[:n] {
					out = append(out, received(t, dest, r))
				}
				return out
			},
			Disconnect: proxy.Disconnect,
			Features:   publishertest.Features{Keys: true, ArbitraryHeaders: true},
		},
		Consume: func(t *testing.T, dest string, h brokertest.Handler) {
			relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error {
				return outboxkinesis.Consume(ctx, admin, dest, h, &outboxkinesis.ConsumeOptions{PollInterval: 50 * time.Millisecond, RetryDelay: 50 * time.Millisecond, Logger: quiet})
			})
		},
		PublishForeign: func(t *testing.T, dest string) {
			_, err := admin.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: aws.String(dest), PartitionKey: aws.String("x"), Data: []byte("not from the outbox")})
			if err != nil {
				t.Fatal(err)
			}
		},
		Stored: func(t *testing.T, dest string) int { return len(readAll(t, admin, dest)) },
		BadDestinations: func(*testing.T) []brokertest.BadDestination {
			bad := testdb.RandomName("bad:stream_") // a valid topic, no valid stream name
			return []brokertest.BadDestination{{Topic: bad, Says: []string{`outboxkinesis: destination "` + bad + `": invalid stream name`}}}
		},
		URL:    "kinesis://?region=" + region + "&endpoint=" + endpoint,
		Broker: brokertest.Features{KeepsOrder: true},
	}
}

// TestSuites runs the conformance, consume and relay suites on the local
// Kinesis server.
func TestSuites(t *testing.T) {
	brokertest.Run(t, target)
}

// TestConsumeCloudEvents runs the consume suite on records published as
// CloudEvents (kinesis://…?format=cloudevents).
func TestConsumeCloudEvents(t *testing.T) {
	t.Parallel()
	brokertest.RunConsume(t, brokertest.CloudEvents(target))
}

// TestDecodeRejectsForeignRecord: a record the relay did not publish is
// ErrNoMessageID.
func TestDecodeRejectsForeignRecord(t *testing.T) {
	t.Parallel()
	for _, data := range []string{"plain bytes", `{"payload":1}`, `[1,2]`} {
		_, err := outboxkinesis.Decode(types.Record{Data: []byte(data), SequenceNumber: aws.String("1")})
		if err == nil || !errors.Is(err, outboxkinesis.ErrNoMessageID) {
			t.Errorf("Decode(%q) = %v, want ErrNoMessageID", data, err)
		}
	}
}
