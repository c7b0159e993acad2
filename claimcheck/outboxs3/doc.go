// Package outboxs3 is a claim-check store (claimcheck.Store) over Amazon
// S3 or an S3-compatible server (MinIO, Ceph, fauxqs, Cloudflare R2), for
// payloads kept out of the outbox table (outbox.Config.ClaimCheck) when
// producers, relays and consumers run on more than one host.
//
// It wraps the *s3.Client the application configured (region,
// credentials, endpoint; UsePathStyle for most S3-compatible servers):
//
//	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
//	blobs, err := outboxs3.New(client, "my-bucket", &outboxs3.Options{Prefix: "outbox/"})
//	p, err := outbox.NewProducer(driver, &outbox.Config{ClaimCheck: &outbox.ClaimCheckConfig{Store: blobs}})
//
// A blob of key K is the object Prefix+K of the bucket; its scheme in
// references is "s3" (outbox-claim-check: s3:K). The bucket belongs to
// the operator: the store creates none. A lifecycle rule on the bucket
// must not expire objects under the prefix sooner than the outbox's
// retention, or messages lose their payloads (dead "claim check: blob …
// not found"); the relay's orphan sweep removes the blobs it no longer
// needs.
//
// It is a module of its own, so that only programs that use it pull in
// the AWS SDK.
package outboxs3
