package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/txoutbox/outbox/claimcheck/outboxs3"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/claimchecktest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// s3Bucket makes a bucket named name + a random suffix on the local S3
// server (scripts/services.sh fauxqs, or OUTBOX_TEST_AWS_ENDPOINT),
// removed with its objects at cleanup, and returns the claim-check store
// keeping blobs in it under prefix and the --claim-check URL of that
// store. The relays the test starts find the server's credentials in
// their environment.
func s3Bucket(t *testing.T, name, prefix string) (claimchecktest.Bucket, string) {
	t.Helper()
	endpoint := os.Getenv("OUTBOX_TEST_AWS_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:14566"
	}
	client := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	bucket := name + hex.EncodeToString(b)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		testdb.Unavailable(t, "the local S3 server at "+endpoint+" (scripts/services.sh fauxqs)", err)
	}
	t.Cleanup(func() {
		for _, k := range listKeys(t, client, bucket, "") {
			_, _ = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		}
		_, _ = client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})
	st, err := outboxs3.New(client, bucket, &outboxs3.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	objects := func(t *testing.T) []string { return listKeys(t, client, bucket, prefix) }
	ref := "s3://" + bucket + "/" + strings.TrimSuffix(prefix, "/") + "?region=us-east-1&path_style=true&endpoint=" + url.QueryEscape(endpoint)
	return claimchecktest.Bucket{Store: st, Scheme: "s3", Prefix: prefix, Objects: objects}, ref
}

// listKeys lists the object names of bucket under prefix.
func listKeys(t *testing.T, client *s3.Client, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list s3://%s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// TestRelayClaimCheckS3: a producer keeps a 2 MiB payload in an S3
// bucket (the local S3 server: scripts/services.sh fauxqs) and the outbox
// command's relay, given --claim-check s3://BUCKET/PREFIX with the AWS
// credentials in its environment, fetches it and delivers it whole (its
// --max-payload-bytes raised above the payload, which it still bounds).
func TestRelayClaimCheckS3(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the outbox command: -short")
	}
	b, ref := s3Bucket(t, "outbox-cmd-", "blobs/")
	claimchecktest.Deliver(t, testdb.New(t, store.Postgres), b, ref)
}
