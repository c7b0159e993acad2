package outboxsqs_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/txoutbox/outbox/internal/testkit/sqstest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// The local SQS server (scripts/emulators/fauxqs.sh) and what these tests
// share with outboxsns's are in package sqstest.

func TestMain(m *testing.M) { sqstest.VerifyTestMain(m) }

// queueURL is the URL of an existing queue.
func queueURL(t testing.TB, c *sqs.Client, name string) string {
	t.Helper()
	out, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: &name})
	if err != nil {
		t.Fatalf("queue %s: %v", name, err)
	}
	return *out.QueueUrl
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
