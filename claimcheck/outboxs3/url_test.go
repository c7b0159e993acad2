package outboxs3_test

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/txoutbox/outbox/claimcheck/outboxs3"
)

// TestOpenURL: s3://BUCKET/PREFIX with region, endpoint and path style
// opens a store that writes under PREFIX with credentials from the AWS
// environment; bad URLs are one-line errors that hold no secret.
func TestOpenURL(t *testing.T) {
	c, name := bucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret-never-printed")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	ctx := context.Background()
	u, _ := url.Parse("s3://" + name + "/blobs?region=us-east-1&path_style=true&endpoint=" + url.QueryEscape(endpoint))
	st, err := outboxs3.OpenURL(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a claim-checked payload")
	if err := st.Put(ctx, id+".x", data); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, id+".x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q, %v", got, err)
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(name)})
	if err != nil || len(out.Contents) != 1 || !strings.HasPrefix(aws.ToString(out.Contents[0].Key), "blobs/") {
		t.Errorf("objects %v (%v), want one under blobs/", out, err)
	}

	for raw, want := range map[string]string{
		"s3:///prefix":                  "no bucket",
		"s3://key:secret@bucket":        "no credentials",
		"s3://bucket?regoin=x":          `unknown parameter "regoin"`,
		"s3://bucket?path_style=maybe":  "path_style",
		"s3://bucket?endpoint=ftp://h":  "endpoint",
		"s3://bucket?region=a&region=b": "more than once",
		"file://bucket":                 "want s3://",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = outboxs3.OpenURL(ctx, u)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "key:secret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("OpenURL(%s): %v; want one line saying %q", raw, err, want)
		}
	}
}
