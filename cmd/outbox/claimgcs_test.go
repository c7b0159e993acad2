package main_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os/exec"
	"path/filepath"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/txoutbox/outbox/claimcheck/outboxgcs"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/claimchecktest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestRelayClaimCheckGCS: a producer keeps a 2 MiB payload in a Cloud
// Storage bucket and the outbox command's relay, given --claim-check
// gs://BUCKET/PREFIX?endpoint=URL, fetches it and delivers it whole (its
// --max-payload-bytes raised above the payload). The server is
// fake-gcs-server in the test process (Google ships no Cloud Storage
// emulator), so the test needs no service; the relay's environment names
// credentials that do not exist, which an emulator endpoint never reads.
// A gs:// URL the relay cannot open is bad configuration, exit 2, named
// on one line.
func TestRelayClaimCheckGCS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the outbox command: -short")
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1"})
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "outbox-blobs"})
	client, err := storage.NewClient(context.Background(), option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	st, err := outboxgcs.New(client, &outboxgcs.Config{Bucket: "outbox-blobs", Prefix: "blobs/"})
	if err != nil {
		t.Fatal(err)
	}
	objects := func(t *testing.T) []string {
		var names []string
		it := client.Bucket("outbox-blobs").Objects(context.Background(), &storage.Query{Prefix: "blobs/"})
		for {
			a, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return names
			}
			if err != nil {
				t.Fatalf("list gs://outbox-blobs/blobs/: %v", err)
			}
			names = append(names, a.Name)
		}
	}

	db := testdb.New(t, store.SQLite)
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "absent.json"))
	ref := "gs://outbox-blobs/blobs?endpoint=" + url.QueryEscape(srv.URL())
	relay := claimchecktest.Deliver(t, db, claimchecktest.Bucket{Store: st, Scheme: "gs", Prefix: "blobs/", Objects: objects}, ref)

	bad := exec.Command(relay.Bin(), "relay", "--db", db.URL, "--to", "http://127.0.0.1:1", "--claim-check", "gs://outbox-blobs/blobs?regoin=eu")
	out, err := bad.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !bytes.Contains(out, []byte(`unknown parameter "regoin"`)) {
		t.Errorf("relay with a bad gs:// URL: %v\n%s", err, out)
	}
}
