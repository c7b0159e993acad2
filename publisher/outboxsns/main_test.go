package outboxsns_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// endpoint is the local SNS and SQS server (scripts/emulators/fauxqs.sh).
var endpoint = getenv("OUTBOX_TEST_AWS_ENDPOINT", "http://127.0.0.1:14566")

const region = "us-east-1"

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// unavailable fails the test in CI and skips it elsewhere.
func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not reachable (CI=true, so this fails; start it with scripts/emulators/fauxqs.sh): %v", what, err)
	}
	t.Skipf("skipping outside CI: %s is not reachable (start it with scripts/emulators/fauxqs.sh): %v", what, err)
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

var static = credentials.NewStaticCredentialsProvider("test", "test", "")

// newSNS is an SNS client of the SDK for the server at url, with static
// test credentials.
func newSNS(url string, opts ...func(*sns.Options)) *sns.Client {
	return sns.New(sns.Options{Region: region, BaseEndpoint: aws.String(url), Credentials: static}, opts...)
}

var reach struct {
	once sync.Once
	err  error
}

// clients are an SNS and an SQS client of the local server, skipping
// (failing in CI) the test when it does not answer.
func clients(t testing.TB) (*sns.Client, *sqs.Client) {
	t.Helper()
	s := newSNS(endpoint)
	q := sqs.New(sqs.Options{Region: region, BaseEndpoint: aws.String(endpoint), Credentials: static})
	reach.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, reach.err = s.ListTopics(ctx, &sns.ListTopicsInput{})
	})
	if reach.err != nil {
		unavailable(t, "the local SNS server at "+endpoint, reach.err)
	}
	return s, q
}

// createTopic creates a topic (FIFO when its name ends in .fifo), deleted
// at cleanup, and returns its ARN.
func createTopic(t testing.TB, c *sns.Client, name string) string {
	t.Helper()
	attrs := map[string]string{}
	if len(name) > 5 && name[len(name)-5:] == ".fifo" {
		attrs["FifoTopic"] = "true"
	}
	out, err := c.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: &name, Attributes: attrs})
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	t.Cleanup(func() { _, _ = c.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: out.TopicArn}) })
	return *out.TopicArn
}

// subscribedQueue creates a queue subscribed to topic (raw message
// delivery or the SNS envelope) and returns its URL.
func subscribedQueue(t testing.TB, s *sns.Client, q *sqs.Client, topic string, raw bool) string {
	t.Helper()
	name := randomName("outboxtest-")
	attrs := map[string]string{}
	if len(topic) > 5 && topic[len(topic)-5:] == ".fifo" {
		name += ".fifo"
		attrs["FifoQueue"] = "true"
	}
	ctx := context.Background()
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	url := *out.QueueUrl
	t.Cleanup(func() { _, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &url}) })
	qa, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	sub := &sns.SubscribeInput{TopicArn: &topic, Protocol: aws.String("sqs"), Endpoint: aws.String(qa.Attributes["QueueArn"])}
	if raw {
		sub.Attributes = map[string]string{"RawMessageDelivery": "true"}
	}
	if _, err := s.Subscribe(ctx, sub); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	return url
}

// reader receives and deletes what arrives at queues, in arrival order.
type reader struct {
	c    *sqs.Client
	mu   sync.Mutex
	got  map[string][]sqstypes.Message
	seen map[string]bool
}

func newReader(c *sqs.Client) *reader {
	return &reader{c: c, got: map[string][]sqstypes.Message{}, seen: map[string]bool{}}
}

// read returns the first n messages that arrived at the queue, failing
// the test if they do not come within d.
func (r *reader) read(t testing.TB, url string, n int, d time.Duration) []sqstypes.Message {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	deadline := time.Now().Add(d)
	for len(r.got[url]) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d messages from %s within %v", len(r.got[url]), n, url, d)
		}
		out, err := r.c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 5,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("receive from %s: %v", url, err)
		}
		for _, m := range out.Messages {
			if !r.seen[aws.ToString(m.MessageId)] {
				r.seen[aws.ToString(m.MessageId)] = true
				r.got[url] = append(r.got[url], m)
			}
			if _, err := r.c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete from %s: %v", url, err)
			}
		}
	}
	return r.got[url][:n]
}

func publish(t testing.TB, p publisher.Publisher, batch ...*publisher.Envelope) []error {
	t.Helper()
	return publishertest.Publish(t, p, 30*time.Second, batch...)
}

func publishOK(t testing.TB, p publisher.Publisher, batch ...*publisher.Envelope) {
	t.Helper()
	for i, err := range publish(t, p, batch...) {
		if err != nil {
			t.Fatalf("message %d (%s): %v", i, batch[i].ID, err)
		}
	}
}

func env(dest, key, payload string, extra map[string]string) *publisher.Envelope {
	return publishertest.Envelope(dest, key, []byte(payload), "application/json", extra)
}
