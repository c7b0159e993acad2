package outboxsns_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/txoutbox/outbox/internal/testkit/sqstest"
)

// The local SNS and SQS server (scripts/emulators/fauxqs.sh), its SQS
// side and what these tests share with outboxsqs's are in package
// sqstest.

func TestMain(m *testing.M) { sqstest.VerifyTestMain(m) }

// newSNS is an SNS client of the SDK for the server at url, with static
// test credentials.
func newSNS(url string, opts ...func(*sns.Options)) *sns.Client {
	return sns.New(sns.Options{Region: sqstest.Region, BaseEndpoint: aws.String(url), Credentials: sqstest.Credentials}, opts...)
}

// clients are an SNS and an SQS client of the local server, skipping
// (failing in CI) the test when it does not answer.
func clients(t testing.TB) (*sns.Client, *sqs.Client) {
	t.Helper()
	s := newSNS(sqstest.Endpoint)
	sqstest.Reachable(t, "the local SNS server at "+sqstest.Endpoint, func(ctx context.Context) error {
		_, err := s.ListTopics(ctx, &sns.ListTopicsInput{})
		return err
	})
	return s, sqstest.NewClient(sqstest.Endpoint)
}

// createTopic creates a topic (FIFO when its name ends in .fifo), deleted
// at cleanup, and returns its ARN.
func createTopic(t testing.TB, c *sns.Client, name string) string {
	t.Helper()
	attrs := map[string]string{}
	if sqstest.IsFIFO(name) {
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
	name := sqstest.RandomName("outboxtest-")
	if sqstest.IsFIFO(topic) {
		name += ".fifo"
	}
	url := sqstest.CreateQueue(t, q, name, nil)
	ctx := context.Background()
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
