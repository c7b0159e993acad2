package outboxs3_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/txoutbox/outbox/claimcheck/outboxs3"
	"github.com/txoutbox/outbox/internal/testkit/claimchecktest"
)

// TestOutboxRoundTrip: a 5 MiB payload enqueued on SQLite goes to S3 at
// enqueue and the relay publishes it inline; a rolled-back Enqueue's blob
// is collected by the orphan sweep and the committed one's kept.
func TestOutboxRoundTrip(t *testing.T) {
	t.Parallel()
	c, name := bucket(t)
	blobs, err := outboxs3.New(c, name, &outboxs3.Options{Prefix: "cc/"})
	if err != nil {
		t.Fatal(err)
	}
	claimchecktest.RoundTrip(t, claimchecktest.Bucket{
		Store:  blobs,
		Scheme: "s3",
		Prefix: "cc/",
		Objects: func(t *testing.T) []string {
			out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(name), Prefix: aws.String("cc/")})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range out.Contents {
				keys = append(keys, aws.ToString(o.Key))
			}
			return keys
		},
	}, 5<<20)
}
