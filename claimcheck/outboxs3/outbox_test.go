package outboxs3_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/claimcheck/outboxs3"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// recorder is a publisher keeping what it was given.
type recorder struct {
	mu  sync.Mutex
	got map[string]outbox.Envelope
}

func (r *recorder) Publish(_ context.Context, batch []*outbox.Envelope) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range batch {
		r.got[e.ID] = *e
	}
	return make([]error, len(batch))
}

func (r *recorder) Close() error { return nil }

func (r *recorder) envelope(id string) (outbox.Envelope, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.got[id]
	return e, ok
}

// TestOutboxRoundTrip: a 5 MiB payload enqueued on SQLite goes to S3 at
// enqueue and the relay publishes it inline; a rolled-back Enqueue's blob
// is collected by the orphan sweep and the committed one's kept.
func TestOutboxRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, name := bucket(t)
	blobs, err := outboxs3.New(c, name, &outboxs3.Options{Prefix: "cc/"})
	if err != nil {
		t.Fatal(err)
	}
	db := testdb.New(t, store.SQLite)
	p, err := outbox.NewProducer(db.Std, &outbox.Config{ClaimCheck: &outbox.ClaimCheckConfig{Store: blobs}})
	if err != nil {
		t.Fatal(err)
	}
	payload := append(append([]byte(`{"fill":"`), bytes.Repeat([]byte("x"), 5<<20)...), `"}`...)
	enqueue := func(commit bool) string {
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		id, err := p.Enqueue(ctx, tx, outbox.Message{Topic: "doc.stored", Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	committed := enqueue(true)
	rolledBack := enqueue(false)
	objects := func() []string {
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(name), Prefix: aws.String("cc/")})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		return keys
	}
	if n := len(objects()); n != 2 {
		t.Fatalf("%d objects, want 2", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE payload = ''"); n != 1 {
		t.Fatalf("%d rows with an empty payload, want 1", n)
	}
	removed, err := outbox.SweepClaimChecks(ctx, db.Std, blobs, 0)
	if err != nil || removed != 1 {
		t.Fatalf("sweep: removed %d, %v; want 1", removed, err)
	}
	left := objects()
	if len(left) != 1 || !bytes.HasPrefix([]byte(left[0]), []byte("cc/"+committed+".")) {
		t.Fatalf("objects left %v, want the committed message's (not %s)", left, rolledBack)
	}

	rec := &recorder{got: map[string]outbox.Envelope{}}
	r, err := db.NewRelay(&outbox.RelayConfig{
		Routes:          []outbox.Route{{Pattern: "*", Publisher: rec}},
		ClaimCheck:      blobs,
		MaxPayloadBytes: 8 << 20,
		MaxPollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if e, ok := rec.envelope(committed); ok {
			if !bytes.Equal(e.Payload, payload) || e.Headers[claimcheck.HeaderRef] != "" {
				t.Fatalf("published %d bytes (want %d), headers %v", len(e.Payload), len(payload), e.Headers)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message was not published within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
