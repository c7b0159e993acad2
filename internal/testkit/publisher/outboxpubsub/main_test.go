package outboxpubsub_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxpubsub"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// project is the project of every test's in-process Pub/Sub server.
const project = "outbox-test"

// Every test runs against pstest, Google's in-process Pub/Sub server,
// reached over gRPC on a loopback port exactly as a client reaches the
// service or its emulator.

// fakeServer starts a pstest server, closed when the test ends. reactors
// answer chosen RPCs in its place (see pstest.ServerReactorOption).
func fakeServer(t testing.TB, reactors ...pstest.ServerReactorOption) *pstest.Server {
	t.Helper()
	srv := pstest.NewServerWithAddress("127.0.0.1:0", reactors...)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// newClient is a client of addr made with the relay's ClientConfig,
// closed when the test ends.
func newClient(t testing.TB, addr string) *pubsub.Client {
	t.Helper()
	c, err := pubsub.NewClientWithConfig(context.Background(), project, outboxpubsub.ClientConfig(),
		option.WithEndpoint(addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithTelemetryDisabled())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newPublisher is a Publisher over client, closed when the test ends.
func newPublisher(t testing.TB, client *pubsub.Client, cfg *outboxpubsub.Config) *outboxpubsub.Publisher {
	t.Helper()
	p, err := outboxpubsub.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// randomID is prefix and 12 random hex digits.
func randomID(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func topicPath(id string) string { return "projects/" + project + "/topics/" + id }

// createTopic creates a topic and returns its ID.
func createTopic(t testing.TB, c *pubsub.Client, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: topicPath(id)}); err != nil {
		t.Fatalf("create topic %s: %v", id, err)
	}
	return id
}

// createSubscription creates a subscription of topic and returns its
// subscriber; ordered enables message ordering.
func createSubscription(t testing.TB, c *pubsub.Client, topic string, ordered bool) *pubsub.Subscriber {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "projects/" + project + "/subscriptions/" + randomID("sub-")
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pb.Subscription{
		Name: name, Topic: topicPath(topic), AckDeadlineSeconds: 10, EnableMessageOrdering: ordered,
	}); err != nil {
		t.Fatalf("create subscription of %s: %v", topic, err)
	}
	return c.Subscriber(name)
}

// stored returns the messages the server stored for topic, in the order
// they arrived, waiting up to d for at least n of them.
func stored(t testing.TB, srv *pstest.Server, topic string, n int, d time.Duration) []*pstest.Message {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var got []*pstest.Message
		for _, m := range srv.Messages() {
			if m.Topic == topicPath(topic) {
				got = append(got, m)
			}
		}
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s holds %d messages after %v, want %d", topic, len(got), d, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// received is a stored message as the conformance suite reads it.
func received(topic string, m *pstest.Message) publishertest.Received {
	return publishertest.Received{
		ID:          m.Attributes[outboxpubsub.AttrMessageID],
		Key:         m.OrderingKey,
		Topic:       m.Attributes[publisher.HeaderTopic],
		Destination: topic,
		Payload:     m.Data,
		Headers:     m.Attributes,
	}
}

// envelope is a message for topic as the relay builds it.
func envelope(topic, key, payload string) *publisher.Envelope {
	return publishertest.Envelope(topic, key, []byte(payload), "application/json", nil)
}

// publish publishes batch within 20 s and returns its results.
func publish(t testing.TB, p publisher.Publisher, batch ...*publisher.Envelope) []error {
	t.Helper()
	return publishertest.Publish(t, p, 20*time.Second, batch...)
}

// failPublish is a pstest reactor that fails the Publish RPCs it is told
// to with a real gRPC status, and lets every other one through.
type failPublish struct {
	mu   sync.Mutex
	fail func(req *pb.PublishRequest) error // nil error: let it through
	seen int                                // Publish RPCs failed so far
}

func (f *failPublish) React(req any) (bool, any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := req.(*pb.PublishRequest)
	if !ok || f.fail == nil {
		return false, nil, nil
	}
	if err := f.fail(r); err != nil {
		f.seen++
		return true, (*pb.PublishResponse)(nil), err
	}
	return false, nil, nil
}

func (f *failPublish) set(fn func(req *pb.PublishRequest) error) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

func (f *failPublish) failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

func (f *failPublish) option() pstest.ServerReactorOption {
	return pstest.ServerReactorOption{FuncName: "Publish", Reactor: f}
}
