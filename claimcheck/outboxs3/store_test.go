package outboxs3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/claimcheck/outboxs3"
)

// endpoint is the local S3 server (fauxqs: scripts/services.sh fauxqs).
var endpoint = getenv("OUTBOX_TEST_AWS_ENDPOINT", "http://127.0.0.1:14566")

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
		t.Fatalf("%s is not reachable (CI=true, so this fails; start it with scripts/services.sh fauxqs): %v", what, err)
	}
	t.Skipf("skipping outside CI: %s is not reachable (start it with scripts/services.sh fauxqs): %v", what, err)
}

var reach struct {
	once sync.Once
	err  error
}

// bucket is a client of the local server and a new bucket on it,
// removed with its objects at cleanup; the test is skipped (failed in
// CI) when the server does not answer.
func bucket(t testing.TB) (*s3.Client, string) {
	t.Helper()
	c := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		UsePathStyle: true,
	})
	reach.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, reach.err = c.ListBuckets(ctx, &s3.ListBucketsInput{})
	})
	if reach.err != nil {
		unavailable(t, "the local S3 server at "+endpoint, reach.err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "outbox-cc-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(name)})
		if err == nil {
			for _, o := range out.Contents {
				_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: o.Key})
			}
		}
		_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return c, name
}

const id = "0190a7c4-1111-7000-8000-000000000001"

// TestStore: Put, Get, Delete and List against a real S3 server, under a
// prefix, with a 5 MiB blob.
func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, name := bucket(t)
	s, err := outboxs3.New(c, name, &outboxs3.Options{Prefix: "outbox/"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Scheme() != "s3" {
		t.Errorf("scheme %q", s.Scheme())
	}
	data := bytes.Repeat([]byte("\x00\xff5MiB"), 1<<20)
	ref := claimcheck.NewRef(s.Scheme(), id, data)
	if err := s.Put(ctx, ref.Key, data); err != nil {
		t.Fatal(err)
	}
	got, err := claimcheck.Fetch(ctx, s, ref)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Fetch: %d bytes, %v", len(got), err)
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(name), Key: aws.String("outbox/" + ref.Key)})
	if err != nil || aws.ToInt64(head.ContentLength) != int64(len(data)) {
		t.Fatalf("the object under the prefix: %v", err)
	}
	// An object outside the store's names is never listed.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("outbox/not a key"), Body: bytes.NewReader([]byte("x"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("elsewhere"), Body: bytes.NewReader([]byte("x"))}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "second", []byte("2")); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := s.List(ctx, time.Now().Add(time.Hour), func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if want := []string{ref.Key, "second"}; !slices.Equal(keys, want) {
		t.Errorf("listed %v, want %v", keys, want)
	}
	keys = nil
	if err := s.List(ctx, time.Now().Add(-time.Hour), func(k string) error { keys = append(keys, k); return nil }); err != nil || len(keys) != 0 {
		t.Errorf("blobs older than an hour: %v %v", keys, err)
	}
	if err := s.Delete(ctx, ref.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, ref.Key); !errors.Is(err, claimcheck.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, ref.Key); err != nil {
		t.Errorf("Delete of a missing object: %v", err)
	}
	if err := s.Put(ctx, "../escape", data); !errors.Is(err, claimcheck.ErrInvalidKey) {
		t.Errorf("Put of a bad key: %v", err)
	}
	if _, err := outboxs3.New(c, "", nil); err == nil {
		t.Error("New with no bucket: no error")
	}
	if _, err := outboxs3.New(c, name, &outboxs3.Options{Prefix: "/abs"}); err == nil {
		t.Error("New with a prefix starting with '/': no error")
	}
}

// TestStoreUnreachable: a server that does not answer is an error that
// is neither ErrNotFound (the relay then retries, uncharged) nor a panic.
func TestStoreUnreachable(t *testing.T) {
	t.Parallel()
	c := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		UsePathStyle: true,
	}, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	s, err := outboxs3.New(c, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Get(ctx, "k"); err == nil || errors.Is(err, claimcheck.ErrNotFound) {
		t.Errorf("Get from no server: %v", err)
	}
}
