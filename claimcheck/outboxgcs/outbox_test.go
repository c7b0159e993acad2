package outboxgcs_test

import (
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/txoutbox/outbox/internal/testkit/claimchecktest"
)

// TestOutboxRoundTrip: a 3 MiB payload enqueued on SQLite goes to Cloud
// Storage at enqueue, its row keeps a gs: reference, and the relay
// publishes it inline; a rolled-back Enqueue's blob is collected by the
// orphan sweep and the committed one's kept.
func TestOutboxRoundTrip(t *testing.T) {
	t.Parallel()
	srv := fakeGCS(t)
	claimchecktest.RoundTrip(t, claimchecktest.Bucket{
		Store:  newStore(t, client(t, srv), "blobs", "cc/"),
		Scheme: "gs",
		Prefix: "cc/",
		Objects: func(t *testing.T) []string {
			list, err := srv.ListObjectsWithOptionsPaginated("blobs", fakestorage.ListOptions{Prefix: "cc/"})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, a := range list.Objects {
				names = append(names, a.Name)
			}
			return names
		},
	}, 3<<20)
}
