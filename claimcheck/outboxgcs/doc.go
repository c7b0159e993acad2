// Package outboxgcs is a claim-check store (claimcheck.Store) over Google
// Cloud Storage, for payloads kept out of the outbox table
// (outbox.Config.ClaimCheck) when producers, relays and consumers run on
// more than one host.
//
// It wraps the *storage.Client the application configured (credentials,
// endpoint, retries):
//
//	client, err := storage.NewClient(ctx) // Application Default Credentials
//	blobs, err := outboxgcs.New(client, &outboxgcs.Config{Bucket: "my-bucket", Prefix: "outbox/"})
//	p, err := outbox.NewProducer(driver, &outbox.Config{ClaimCheck: &outbox.ClaimCheckConfig{Store: blobs}})
//
// or opens one from a URL, as the outbox command's --claim-check does
// (OpenURL):
//
//	gs://BUCKET[/PREFIX][?endpoint=http://HOST:PORT]
//
// A blob of key K is the object PREFIX+K of the bucket; its scheme in
// references is "gs" (outbox-claim-check: gs:K). The bucket belongs to
// the operator: the store creates none. A lifecycle rule on the bucket
// must not delete objects under the prefix sooner than the outbox's
// retention, or messages lose their payloads (dead "claim check: blob …
// not found"); the relay's orphan sweep removes the blobs it no longer
// needs.
//
// Put never replaces an object: it writes with the precondition that no
// object of that name exists, which also makes the client retry a failed
// upload safely. A key holds the blob's SHA-256 (claimcheck.Key), so an
// object already under it is either the same blob (a retried or repeated
// Put, taken as done) or another one, refused.
//
// The tests run against fake-gcs-server (github.com/fsouza/fake-gcs-server),
// started inside the test process: Google ships no emulator for Cloud
// Storage, and fake-gcs-server serves the JSON API that the Go client
// speaks, preconditions included.
//
// It is a module of its own, so that only programs that use it pull in
// the Google Cloud client libraries.
package outboxgcs
