package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck/outboxs3"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/internal/testserver"
)

// TestRelayClaimCheckS3: a producer keeps a 2 MiB payload in an S3
// bucket (the local S3 server: scripts/services.sh fauxqs) and the outbox
// command's relay, given --claim-check s3://BUCKET/PREFIX with the AWS
// credentials in its environment, fetches it and delivers it whole (its
// --max-payload-bytes raised above the payload, which it still bounds).
func TestRelayClaimCheckS3(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the outbox command: -short")
	}
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
	bucket := "outbox-cmd-" + hex.EncodeToString(b)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		testdb.Unavailable(t, "the local S3 server at "+endpoint+" (scripts/services.sh fauxqs)", err)
	}
	st, err := outboxs3.New(client, bucket, &outboxs3.Options{Prefix: "blobs/"})
	if err != nil {
		t.Fatal(err)
	}

	db := testdb.New(t, store.Postgres)
	p, err := outbox.NewProducer(db.Std, &outbox.Config{MaxPayloadBytes: 64 << 10, ClaimCheck: &outbox.ClaimCheckConfig{Store: st, Threshold: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 128<<10) // 2 MiB
	err = db.Std.InTx(ctx, func(tx *sql.Tx) error {
		_, err := p.Enqueue(ctx, tx, outbox.Message{Topic: "claim.s3", ContentType: "application/octet-stream", Payload: payload})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var got []byte
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = body
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	ref := "s3://" + bucket + "/blobs?region=us-east-1&path_style=true&endpoint=" + url.QueryEscape(endpoint)
	cmd := exec.Command(buildOutbox(t, ""), "relay", "--db", db.URL, "--to", hook.URL, "--claim-check", ref, "--max-payload-bytes", "4194304", "--max-poll", "50ms", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "OUTBOX_WEBHOOK_SECRET=claim-check-s3-test-secret")
	cmd.Stderr = os.Stderr
	relay := testserver.Spawn(t, cmd, "relay")
	relaytest.WaitFor(t, time.Minute, "the payload delivered and the message sent", func() bool {
		if relay.Exited() {
			t.Fatalf("the relay ended: %v", relay.State())
		}
		return relaytest.Count(t, db, "sent") == 1
	})
	relay.Term(t)
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(got, payload) {
		t.Errorf("delivered %d bytes, want the %d of the payload", len(got), len(payload))
	}
}
