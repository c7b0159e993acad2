// Package claimcheck keeps large outbox payloads out of the outbox table
// (the claim-check pattern): a producer configured with
// outbox.Config.ClaimCheck writes a payload over its threshold to a blob
// Store before the caller's transaction commits, and the row holds an
// empty payload and a reference in its headers. The relay, per route,
// fetches the blob and publishes the payload ("inline"), or publishes the
// reference alone for consumers to fetch ("reference",
// inbox.Message.Resolve).
//
// # The reference
//
// A claim-checked row (and, on a reference route, the published message)
// carries three headers:
//
//	outbox-claim-check:        SCHEME:KEY   (e.g. file:0190….5e2b…)
//	outbox-claim-check-size:   the blob's length in bytes, decimal
//	outbox-claim-check-sha256: the blob's SHA-256, lowercase hex
//
// SCHEME names the kind of store (Store.Scheme: "file" for Dir, "s3" for
// the S3 store of module claimcheck/outboxs3, "gs" for the Cloud Storage
// store of module claimcheck/outboxgcs); KEY is the blob's key in
// it, MESSAGE_ID "." SHA256 as Key makes it. The blob is the payload's
// bytes exactly as they are to be delivered (binary is fine: no base64),
// or, for a payload sealed at enqueue (package seal), the sealed text the
// payload column would have held. The row's payload is empty, and it has
// no content-transfer-encoding header; content-type stays the payload's.
//
// Everything above is what a producer in another language writes to
// enqueue a claim-checked message with plain SQL, and what a consumer in
// another language reads to fetch one; docs/claim-check.md has examples.
//
// # Lifetime
//
// A blob is written before its row commits and must outlive it; a blob
// whose row never committed (a rolled-back transaction) or is gone
// (retention, a discarded dead letter) is an orphan. The relay's
// janitor collects orphans older than a grace period (Sweep): a blob is
// removed only when no row of outbox_messages or outbox_messages_archive
// references it. Never a row without its blob; for a while, a blob
// without its row.
//
// The package depends on nothing else of the module and on the standard
// library only.
package claimcheck
