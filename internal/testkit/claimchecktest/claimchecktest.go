// Package claimchecktest holds the tests every claim-check store over an
// object storage service (Amazon S3, Cloud Storage) passes: the outbox
// round trip through a store (RoundTrip), the outbox command's relay
// delivering a payload it fetches from a --claim-check URL (Deliver), and
// the crash test of relays killed while they deliver large payloads
// (Crash, with the webhook receiver Hook that checks their bytes).
package claimchecktest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// Bucket is a claim-check store keeping its blobs in a bucket of an
// object storage service, and a look at that bucket past the store.
type Bucket struct {
	// Store keeps each blob in an object named Prefix + its key.
	Store claimcheck.Store
	// Scheme is the scheme the store's references must name ("s3", "gs").
	Scheme string
	// Prefix starts the name of each of the store's objects.
	Prefix string
	// Objects lists the names of the bucket's objects under Prefix,
	// through the service's own client.
	Objects func(t *testing.T) []string
}

// RoundTrip checks b with the outbox: a payload of size bytes (at most
// 8 MiB) enqueued on SQLite goes to the bucket at enqueue, and its row
// keeps an empty payload and a reference of b.Scheme; the orphan sweep
// collects the blob of an Enqueue whose transaction rolled back and keeps
// the committed one's; a relay publishes the committed message inline,
// byte for byte and without the reference.
func RoundTrip(t *testing.T, b Bucket, size int) {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t, store.SQLite)
	cfg := &outbox.Config{ClaimCheck: &outbox.ClaimCheckConfig{Store: b.Store}}
	payload := append(append([]byte(`{"fill":"`), bytes.Repeat([]byte("x"), size)...), `"}`...)
	msg := outbox.Message{Topic: "doc.stored", Payload: payload}
	committed := enqueue(t, db, cfg, true, msg)[0]
	rolledBack := enqueue(t, db, cfg, false, msg)[0]
	if n := len(b.Objects(t)); n != 2 {
		t.Fatalf("%d objects, want 2", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE payload = '' AND headers LIKE ?", `%"`+b.Scheme+":"+committed+".%"); n != 1 {
		t.Fatalf("%d rows with an empty payload and a %s: reference, want 1", n, b.Scheme)
	}
	removed, err := outbox.SweepClaimChecks(ctx, db.Std, b.Store, 0)
	if err != nil || removed != 1 {
		t.Fatalf("sweep: removed %d, %v; want 1", removed, err)
	}
	left := b.Objects(t)
	if len(left) != 1 || !strings.HasPrefix(left[0], b.Prefix+committed+".") {
		t.Fatalf("objects left %v, want the committed message's (not %s)", left, rolledBack)
	}

	published := make(chan outbox.Envelope, 1)
	cfgRelay := relaytest.Config(outbox.PublisherFunc(func(_ context.Context, e *outbox.Envelope) error {
		if e.ID == committed {
			c := *e
			c.Payload = bytes.Clone(e.Payload)
			c.Headers = maps.Clone(e.Headers)
			select {
			case published <- c:
			default:
			}
		}
		return nil
	}))
	cfgRelay.ClaimCheck = b.Store
	cfgRelay.MaxPayloadBytes = 8 << 20
	stop := relaytest.Start(t, db, cfgRelay)
	defer stop()
	select {
	case e := <-published:
		if !bytes.Equal(e.Payload, payload) || e.Headers[claimcheck.HeaderRef] != "" {
			t.Fatalf("published %d bytes (want %d), headers %v", len(e.Payload), len(payload), e.Headers)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not published within 30 s")
	}
}

// Produce commits msgs in one transaction through a producer with cfg
// over db's database/sql driver, whatever its dialect, and returns their
// ids.
func Produce(t *testing.T, db *testdb.DB, cfg *outbox.Config, msgs ...outbox.Message) []string {
	t.Helper()
	return enqueue(t, db, cfg, true, msgs...)
}

// errRolledBack ends the transaction of an Enqueue that is not to commit.
var errRolledBack = errors.New("rolled back")

// enqueue enqueues msgs through a producer with cfg over db's
// database/sql driver in a transaction that commits or rolls back, and
// returns their ids.
func enqueue(t *testing.T, db *testdb.DB, cfg *outbox.Config, commit bool, msgs ...outbox.Message) []string {
	t.Helper()
	ctx := context.Background()
	p, err := outbox.NewProducer(db.Std, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	err = db.Std.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		if ids, err = p.EnqueueMany(ctx, tx, msgs); err == nil && !commit {
			err = errRolledBack
		}
		return err
	})
	if err != nil && !errors.Is(err, errRolledBack) {
		t.Fatal(err)
	}
	return ids
}

// Ref is the claim-check reference in the headers of message id's row.
func Ref(t *testing.T, db *testdb.DB, id string) claimcheck.Ref {
	t.Helper()
	var h sql.NullString
	q := testdb.Placeholder(db.Dialect, "SELECT headers FROM outbox_messages WHERE message_id = ?")
	if err := db.SQL.QueryRowContext(context.Background(), q, id).Scan(&h); err != nil {
		t.Fatalf("the headers of message %s: %v", id, err)
	}
	headers := map[string]string{}
	if err := json.Unmarshal([]byte(h.String), &headers); err != nil {
		t.Fatalf("the headers of message %s, %q: %v", id, h.String, err)
	}
	ref, ok, err := claimcheck.ParseHeaders(headers)
	if err != nil || !ok {
		t.Fatalf("the reference of message %s: %v %v (%s)", id, ok, err, h.String)
	}
	return ref
}
