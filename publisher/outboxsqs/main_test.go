package outboxsqs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// endpoint is the local SQS server (scripts/emulators/fauxqs.sh).
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

// randomName is prefix and 12 random hex digits.
func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// newClient is an SQS client of the SDK for the server at url, with
// static test credentials, and the options opts set.
func newClient(url string, opts ...func(*sqs.Options)) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       region,
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, opts...)
}

var reach struct {
	once sync.Once
	err  error
}

// client is a client of the local server, skipping (failing in CI) the
// test when it does not answer.
func client(t testing.TB) *sqs.Client {
	t.Helper()
	c := newClient(endpoint)
	reach.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, reach.err = c.ListQueues(ctx, &sqs.ListQueuesInput{})
	})
	if reach.err != nil {
		unavailable(t, "the local SQS server at "+endpoint, reach.err)
	}
	return c
}

// createQueue creates a queue named name (FIFO when it ends in .fifo) with
// attributes, deleted at cleanup, and returns its URL.
func createQueue(t testing.TB, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	a := map[string]string{}
	if len(name) > 5 && name[len(name)-5:] == ".fifo" {
		a["FifoQueue"] = "true"
	}
	for k, v := range attrs {
		a[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: a})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	return *out.QueueUrl
}

// queueURL is the URL of an existing queue.
func queueURL(t testing.TB, c *sqs.Client, name string) string {
	t.Helper()
	out, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: &name})
	if err != nil {
		t.Fatalf("queue %s: %v", name, err)
	}
	return *out.QueueUrl
}

// reader receives and deletes what arrives at queues, keeping it in
// arrival order, so that the first n of a queue can be asked for again.
type reader struct {
	c    *sqs.Client
	mu   sync.Mutex
	got  map[string][]types.Message
	seen map[string]bool // SQS message ids
}

func newReader(c *sqs.Client) *reader {
	return &reader{c: c, got: map[string][]types.Message{}, seen: map[string]bool{}}
}

// read returns the first n messages that arrived at queue, failing the
// test if they do not come within d. Messages are received with a short
// visibility timeout: should an answer be lost on the way, its messages
// come back soon (and a copy received twice counts once).
func (r *reader) read(t testing.TB, url string, n int, d time.Duration) []types.Message {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	deadline := time.Now().Add(d)
	for len(r.got[url]) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d messages from %s within %v", len(r.got[url]), n, url, d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := r.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 5,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		cancel()
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

// received is an SQS message as the conformance suite sees it.
func received(m types.Message, queue string) publishertest.Received {
	h := map[string]string{}
	for k, v := range m.MessageAttributes {
		h[k] = aws.ToString(v.StringValue)
	}
	return publishertest.Received{
		ID:          h["message-id"],
		Key:         h[publisher.HeaderBusinessKey],
		Topic:       h[publisher.HeaderTopic],
		Destination: queue,
		Payload:     []byte(aws.ToString(m.Body)),
		Headers:     h,
	}
}

// publish publishes batch within 30 s and returns its results.
func publish(t testing.TB, p publisher.Publisher, batch ...*publisher.Envelope) []error {
	t.Helper()
	return publishertest.Publish(t, p, 30*time.Second, batch...)
}

// publishOK publishes batch, failing the test unless every message is
// confirmed.
func publishOK(t testing.TB, p publisher.Publisher, batch ...*publisher.Envelope) {
	t.Helper()
	for i, err := range publish(t, p, batch...) {
		if err != nil {
			t.Fatalf("message %d (%s): %v", i, batch[i].ID, err)
		}
	}
}

// counter is an http.RoundTripper that counts the requests of each
// operation (X-Amz-Target) it passes on.
type counter struct {
	mu   sync.Mutex
	n    map[string]int
	next http.RoundTripper
}

func newCounter() *counter { return &counter{n: map[string]int{}, next: http.DefaultTransport} }

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Header.Get("X-Amz-Target")]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *counter) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n["AmazonSQS."+op]
}

func itoa(i int) string { return strconv.Itoa(i) }
