package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/relay"
)

// Claim-check defaults.
const (
	// DefaultClaimCheckThreshold is the payload size above which a
	// producer with a ClaimCheckConfig writes the payload to its store:
	// 256 KiB, the SQS and SNS limit.
	DefaultClaimCheckThreshold = 256 << 10
	// DefaultClaimCheckMaxPayloadBytes is the largest payload a producer
	// accepts for the claim check.
	DefaultClaimCheckMaxPayloadBytes = 64 << 20
	// DefaultClaimCheckGrace is how old a blob must be before the relay's
	// orphan sweep may remove it when no row references it.
	DefaultClaimCheckGrace = relay.DefaultClaimCheckGrace
)

// ClaimCheckConfig makes a Producer keep large payloads out of the outbox
// table (package claimcheck): a payload over Threshold is written to
// Store at Enqueue, inside the caller's transaction but before it
// commits, and the row holds an empty payload and the reference in its
// headers (claimcheck.HeaderRef, HeaderSize, HeaderSHA256). The relay
// then publishes the payload or the reference, per route
// (Route.ClaimCheck). A payload that is also sealed (Config.Seal) is
// sealed first: the blob holds the sealed text, the key id stays in the
// row. A transaction that rolls back leaves its blobs behind, and the
// relay's orphan sweep removes them (RelayConfig.ClaimCheck).
type ClaimCheckConfig struct {
	// Store keeps the blobs, e.g. claimcheck.OpenDir(path) or the S3
	// store of module claimcheck/outboxs3. Required.
	Store claimcheck.Store
	// Threshold: payloads of more bytes than this go to the store.
	// Defaults to DefaultClaimCheckThreshold (256 KiB).
	Threshold int
	// Topics are route patterns (see Route) of the topics whose large
	// payloads go to the store; others are held to
	// Config.MaxPayloadBytes as usual. Defaults to none: every topic.
	Topics []string
	// MaxPayloadBytes is the largest payload accepted for the store
	// (Config.MaxPayloadBytes still bounds the others). Defaults to
	// DefaultClaimCheckMaxPayloadBytes (64 MiB).
	MaxPayloadBytes int
}

// SweepClaimChecks removes the blobs of blobs last written more than
// grace ago that no row of the outbox table (or its archive) over driver
// references, and returns how many it removed: the blobs of rolled-back
// transactions and of rows that are gone. The relay that runs retention
// does this by itself (RelayConfig.ClaimCheck); this is for a store no
// relay is given, or a job of its own. grace must outlast the longest
// transaction a producer keeps open after Enqueue, or a blob may go
// before its row commits.
func SweepClaimChecks[TTx any](ctx context.Context, driver Driver[TTx], blobs claimcheck.Store, grace time.Duration) (int, error) {
	if blobs == nil {
		return 0, errors.New("outbox: SweepClaimChecks: nil store")
	}
	if grace < 0 {
		return 0, errors.New("outbox: SweepClaimChecks: negative grace")
	}
	b, err := backendOf("SweepClaimChecks", driver)
	if err != nil {
		return 0, err
	}
	n, err := relay.SweepBlobs(ctx, b.Store, blobs, grace)
	if err != nil {
		return n, fmt.Errorf("outbox: claim-check sweep: %w", err)
	}
	return n, nil
}
