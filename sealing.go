package outbox

import (
	"context"

	"github.com/txoutbox/outbox/internal/enqueue"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/seal"
)

// SealConfig makes a Producer seal payloads before they are written
// (package seal): the outbox table, its replicas and backups hold them
// encrypted, bound to their message id, with the algorithm and key id in
// the row's headers (seal.HeaderAlgorithm, seal.HeaderKeyID). Each route
// of the relay then opens them or passes them on sealed (Route.Sealed).
type SealConfig struct {
	// Keys provides the current key, and each data subject's key for
	// messages that name a SealSubject (a seal.SubjectKeyProvider then).
	// Required.
	Keys seal.KeyProvider
	// Algorithm seals the payloads. Defaults to seal.AES256GCM.
	Algorithm seal.Algorithm
	// Topics are route patterns (see Route) of the topics whose payloads
	// are sealed; a message naming a SealSubject is sealed whatever its
	// topic. Defaults to none: every topic.
	Topics []string
	// Headers names message headers sealed with the payload (e.g.
	// "x-customer-email"): a sealed message stores them in
	// seal.HeaderSealedHeaders instead, and they come back as headers
	// where the payload is opened. content-type and the trace headers
	// stay plain. Defaults to none.
	Headers []string
}

// sealRow replaces row's payload by m's payload sealed when the producer
// seals m (enqueue.Seal.Row); limit is the payload limit m is held to.
func (p *Producer[TTx]) sealRow(ctx context.Context, i int, row *store.NewMessage, m *Message, limit int) error {
	return validationError((*enqueue.Seal)(p.cfg.Seal).Row(ctx, i, row, (*enqueue.Message)(m), limit))
}
