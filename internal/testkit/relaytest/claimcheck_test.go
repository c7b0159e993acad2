package relaytest_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/seal"
)

// bigJSON is a JSON document of about n bytes, marked with mark.
func bigJSON(n int, mark string) []byte {
	b := make([]byte, 0, n+64)
	b = append(b, `{"mark":"`+mark+`","fill":"`...)
	for len(b) < n {
		b = append(b, "abcdefghijklmnopqrstuvwxyz0123456789"...)
	}
	return append(b, `"}`...)
}

// rowOf is the payload and headers of the message id.
func rowOf(t *testing.T, db *testdb.DB, id string) (payload string, headers map[string]string) {
	t.Helper()
	q := testdb.Placeholder(db.Dialect, "SELECT payload, headers FROM outbox_messages WHERE message_id = ?")
	var p, h sql.NullString
	if err := db.SQL.QueryRowContext(context.Background(), q, id).Scan(&p, &h); err != nil {
		t.Fatal(err)
	}
	headers = map[string]string{}
	if err := json.Unmarshal([]byte(h.String), &headers); err != nil {
		t.Fatalf("headers %q: %v", h.String, err)
	}
	return p.String, headers
}

// blobFiles lists the blob files of d.
func blobFiles(t *testing.T, d *claimcheck.Dir) []string {
	t.Helper()
	es, err := os.ReadDir(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestClaimCheckRoundTrip: 5 MiB payloads go to a directory store at
// enqueue and the rows hold none of them, on every database; a route
// that inlines them publishes them byte for byte (sealed ones opened),
// one that passes references publishes the reference, which the consumer
// resolves; a missing blob and a blob replaced by other bytes make their
// messages dead with the reason, never published; small payloads stay in
// their rows.
func TestClaimCheckRoundTrip(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t, d)
			dir, err := claimcheck.OpenDir(filepath.Join(t.TempDir(), "blobs"))
			if err != nil {
				t.Fatal(err)
			}
			keys := keyFile(t)
			cfg := &outbox.Config{
				ClaimCheck: &outbox.ClaimCheckConfig{Store: dir, Threshold: 64 << 10, Topics: []string{"big.>"}},
				Seal:       &outbox.SealConfig{Keys: keys, Topics: []string{"big.sealed"}},
			}
			const mib = 1 << 20
			inline := bigJSON(5*mib, "inline-secret")
			binary := bytes.Repeat([]byte("\x00\xff\x10binary"), 5*mib/9)
			sealed := bigJSON(5*mib, "sealed-secret")
			small := []byte(`{"small":true}`)
			ids := produce(t, db, cfg,
				outbox.Message{Topic: "big.inline", Key: "k", Payload: inline, Headers: map[string]string{"x-app": "a"}},
				outbox.Message{Topic: "big.ref", Key: "k", Payload: binary, ContentType: "application/octet-stream"},
				outbox.Message{Topic: "big.missing", Payload: bigJSON(300<<10, "missing")},
				outbox.Message{Topic: "big.sealed", Payload: sealed},
				outbox.Message{Topic: "big.small", Payload: small},
				outbox.Message{Topic: "big.replaced", Payload: bigJSON(200<<10, "replaced")},
				outbox.Message{Topic: "other.large", Payload: bigJSON(100<<10, "stays")},
			)
			refs := map[string]claimcheck.Ref{}
			for i, id := range ids {
				p, h := rowOf(t, db, id)
				ref, ok, err := claimcheck.ParseHeaders(h)
				if err != nil {
					t.Fatal(err)
				}
				if claimed := i != 4 && i != 6; claimed != ok || (ok && p != "") {
					t.Fatalf("message %d: claimed %v (want %v), payload column of %d bytes, headers %v", i, ok, claimed, len(p), h)
				}
				if ok {
					if ref.Scheme != "file" || !strings.HasPrefix(ref.Key, id+".") || h[publisher.HeaderTransferEncode] != "" {
						t.Errorf("message %d: reference %+v, headers %v", i, ref, h)
					}
					refs[id] = ref
				}
			}
			if h := rowOfHeaders(t, db, ids[3]); h[seal.HeaderKeyID] != "k1" {
				t.Errorf("the sealed blob's row: %v", h)
			}
			b, err := os.ReadFile(filepath.Join(dir.Path(), refs[ids[3]].Key))
			if err != nil || bytes.Contains(b, []byte("sealed-secret")) || int64(len(b)) != refs[ids[3]].Size {
				t.Fatalf("the sealed blob: %d bytes, plain text in it: %v, %v", len(b), bytes.Contains(b, []byte("sealed-secret")), err)
			}
			if err := dir.Delete(ctx, refs[ids[2]].Key); err != nil {
				t.Fatal(err)
			}
			if err := dir.Put(ctx, refs[ids[5]].Key, bigJSON(200<<10, "REPLACED")); err != nil {
				t.Fatal(err)
			}

			rec := newRecorder()
			rc := relaytest.Config(rec)
			rc.Keys, rc.ClaimCheck, rc.MaxPayloadBytes = keys, dir, 8*mib
			rc.Routes = []outbox.Route{
				{Pattern: "big.ref", Publisher: rec, ClaimCheck: outbox.ClaimReference},
				{Pattern: "*", Publisher: rec, ClaimCheck: outbox.ClaimInline},
			}
			relaytest.Start(t, db, rc)
			relaytest.WaitFor(t, 60*time.Second, "every message settled", func() bool { return relaytest.Count(t, db, "pending") == 0 })

			e, ok := rec.envelope(ids[0])
			if !ok || !bytes.Equal(e.Payload, inline) {
				t.Errorf("inlined payload: %d bytes, want %d", len(e.Payload), len(inline))
			}
			if e.Headers[claimcheck.HeaderRef] != "" || e.Headers[publisher.HeaderContentType] != "application/json" || e.Headers["x-app"] != "a" {
				t.Errorf("inlined message headers %v", e.Headers)
			}
			if e, _ := rec.envelope(ids[3]); !bytes.Equal(e.Payload, sealed) || e.Headers[seal.HeaderAlgorithm] != "" {
				t.Errorf("sealed blob inlined: %d bytes (want %d), headers %v", len(e.Payload), len(sealed), e.Headers)
			}
			if e, _ := rec.envelope(ids[4]); !bytes.Equal(e.Payload, small) {
				t.Errorf("small payload %q", e.Payload)
			}
			if e, _ := rec.envelope(ids[6]); len(e.Payload) < 100<<10 {
				t.Errorf("a large payload of another topic: %d bytes", len(e.Payload))
			}
			// By reference: the consumer fetches the blob.
			e, ok = rec.envelope(ids[1])
			if !ok || len(e.Payload) != 0 || e.Headers[claimcheck.HeaderRef] != refs[ids[1]].String() ||
				e.Headers[publisher.HeaderContentType] != "application/octet-stream" {
				t.Fatalf("reference message: %d bytes, headers %v", len(e.Payload), e.Headers)
			}
			m := &inbox.Message{ID: e.ID, Topic: e.Topic, Headers: e.Headers, Payload: e.Payload}
			if err := m.Resolve(ctx, dir); err != nil || !bytes.Equal(m.Payload, binary) || m.Headers[claimcheck.HeaderRef] != "" {
				t.Errorf("inbox Resolve: %d bytes (want %d), %v, headers %v", len(m.Payload), len(binary), err, m.Headers)
			}
			wantDead(t, db, rec, map[string]string{
				ids[2]: "claim check: blob " + refs[ids[2]].String() + " not found",
				ids[5]: "claim check: claimcheck: blob does not match its reference: " + refs[ids[5]].String() + " has another SHA-256",
			}, 5)
		})
	}
}

// rowOfHeaders is the headers of the message id.
func rowOfHeaders(t *testing.T, db *testdb.DB, id string) map[string]string {
	t.Helper()
	_, h := rowOf(t, db, id)
	return h
}

// enqueueTx enqueues msgs through a Producer with cfg in a transaction
// that commits or rolls back, and returns the error of the Enqueue.
func enqueueTx(t *testing.T, db *testdb.DB, cfg *outbox.Config, commit bool, msgs ...outbox.Message) ([]string, error) {
	t.Helper()
	ctx := context.Background()
	if db.PGX != nil {
		p, err := outbox.NewProducer(db.PGX, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		ids, err := p.EnqueueMany(ctx, tx, msgs)
		if err == nil && commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return ids, err
	}
	p, err := outbox.NewProducer(db.Std, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ids, err := p.EnqueueMany(ctx, tx, msgs)
	if err == nil && commit {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return ids, err
}

// sweep runs outbox.SweepClaimChecks over db.
func sweep(t *testing.T, db *testdb.DB, blobs claimcheck.Store, grace time.Duration) int {
	t.Helper()
	var n int
	var err error
	if db.PGX != nil {
		n, err = outbox.SweepClaimChecks(context.Background(), db.PGX, blobs, grace)
	} else {
		n, err = outbox.SweepClaimChecks(context.Background(), db.Std, blobs, grace)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestClaimCheckLifetime: a rolled-back Enqueue leaves a blob that the
// orphan sweep removes, a committed one's is kept, young blobs are left
// for the grace period, a second Enqueue under a taken id does not touch
// the committed blob, and once retention removes a delivered row, the
// relay's own sweep removes its blob.
func TestClaimCheckLifetime(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t, d)
			dir, err := claimcheck.OpenDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			cfg := &outbox.Config{ClaimCheck: &outbox.ClaimCheckConfig{Store: dir, Threshold: 16}}
			kept := []byte(`{"committed":"` + strings.Repeat("c", 100) + `"}`)
			committed, err := enqueueTx(t, db, cfg, true, outbox.Message{Topic: "doc.kept", Payload: kept})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := enqueueTx(t, db, cfg, false, outbox.Message{Topic: "doc.rolledback", Payload: []byte(`{"rolled":"` + strings.Repeat("r", 100) + `"}`)}); err != nil {
				t.Fatal(err)
			}
			_, err = enqueueTx(t, db, cfg, true, outbox.Message{ID: committed[0], Topic: "doc.kept", Payload: []byte(`{"other":"` + strings.Repeat("o", 100) + `"}`)})
			if !errors.Is(err, outbox.ErrDuplicateMessageID) {
				t.Fatalf("a second Enqueue under the same id: %v", err)
			}
			if n := len(blobFiles(t, dir)); n != 3 {
				t.Fatalf("%d blobs, want 3 (committed, rolled back, duplicate)", n)
			}
			if n := sweep(t, db, dir, time.Hour); n != 0 {
				t.Errorf("the sweep removed %d blobs younger than its grace", n)
			}
			if n := sweep(t, db, dir, 0); n != 2 {
				t.Errorf("the sweep removed %d blobs, want 2", n)
			}
			files := blobFiles(t, dir)
			ref, _, _ := claimcheck.ParseHeaders(rowOfHeaders(t, db, committed[0]))
			if len(files) != 1 || files[0] != ref.Key {
				t.Fatalf("blobs left %v, want the committed one's %s", files, ref.Key)
			}
			if b, err := claimcheck.Fetch(ctx, dir, ref); err != nil || !bytes.Equal(b, kept) {
				t.Fatalf("the committed blob: %q %v", b, err)
			}

			// Delivered, then removed by retention: the relay's sweep
			// removes the blob.
			rec := newRecorder()
			rc := relaytest.Config(rec)
			rc.ClaimCheck, rc.ClaimCheckGrace = dir, time.Millisecond
			rc.Retention = &outbox.RetentionConfig{Sent: time.Millisecond, Interval: 50 * time.Millisecond}
			relaytest.Start(t, db, rc)
			relaytest.WaitFor(t, 30*time.Second, "the row removed by retention", func() bool {
				return db.Count(t, "SELECT count(*) FROM outbox_messages") == 0
			})
			relaytest.WaitFor(t, 30*time.Second, "the blob removed", func() bool { return len(blobFiles(t, dir)) == 0 })
			if e, ok := rec.envelope(committed[0]); !ok || !bytes.Equal(e.Payload, kept) {
				t.Errorf("delivered %q, want %q", e.Payload, kept)
			}
		})
	}
}
