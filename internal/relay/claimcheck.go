package relay

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/internal/store"
)

// Route modes of a claim-checked payload (Route.ClaimCheck).
const (
	// ClaimInline: the relay fetches the blob and publishes the payload.
	// The default.
	ClaimInline = "inline"
	// ClaimReference: the relay publishes the reference headers and no
	// payload, for consumers to fetch the blob.
	ClaimReference = "reference"
)

// DefaultClaimCheckGrace is how old an unreferenced blob must be before
// the orphan sweep removes it: longer than any transaction of a producer
// may stay open between writing its blob and committing its row.
const DefaultClaimCheckGrace = time.Hour

// claimRoundBytes bounds the blob bytes one round holds in memory: the
// claim-checked messages past it (after the first, which always goes)
// wait for a later round, uncharged.
const claimRoundBytes = 64 << 20

// maxBlobSweepEvery bounds the wait between two orphan sweeps.
const maxBlobSweepEvery = 15 * time.Minute

// blobBudget counts the blob bytes a round fetched.
type blobBudget struct {
	mu   sync.Mutex
	used int64
	n    int
}

// take reserves size bytes; false when the round holds enough already.
// The first blob of a round is always taken, so that one larger than the
// budget still goes.
func (b *blobBudget) take(size int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n > 0 && b.used+size > claimRoundBytes {
		return false
	}
	b.n++
	b.used += size
	return true
}

// fetchBlob is the blob a claim-checked row references, checked against
// its size and digest. A row that cannot have it returns its outcome:
// dead "claim check: …" (no store, blob missing or not the one
// referenced: never published without its payload); pending uncharged
// when the store did not answer or the round holds enough blobs.
func (r *Relay) fetchBlob(it *item, ref claimcheck.Ref, budget *blobBudget) ([]byte, *store.Outcome) {
	row := it.row
	dead := func(msg string) *store.Outcome {
		return &store.Outcome{ID: row.ID, Status: store.StatusDead, Error: "claim check: " + msg, CountAttempt: true}
	}
	blobs := r.cfg.ClaimCheck
	if blobs == nil {
		return nil, dead("the relay has no blob store (outbox relay --claim-check DIR) for " + quoteShort(ref.String()))
	}
	if !budget.take(ref.Size) {
		return nil, &store.Outcome{ID: row.ID, Status: store.StatusPending, Error: "not counted (claim-checked payloads wait for the next round)"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.PublishTimeout)
	defer cancel()
	blob, err := claimcheck.Fetch(ctx, blobs, ref)
	switch {
	case err == nil:
		return blob, nil
	case errors.Is(err, claimcheck.ErrNotFound):
		return nil, dead("blob " + ref.String() + " not found")
	case errors.Is(err, claimcheck.ErrMismatch), errors.Is(err, claimcheck.ErrWrongStore), errors.Is(err, claimcheck.ErrInvalidKey):
		return nil, dead(oneLine(err.Error()))
	}
	return nil, &store.Outcome{ID: row.ID, Status: store.StatusPending, Delay: keyRetryDelay,
		Error: "not counted (the blob store could not answer): " + redact.Text(oneLine(err.Error()))}
}

// refStore is what the orphan sweep needs of the database.
type refStore interface {
	ClaimRefs(ctx context.Context, ids []string) (map[string]bool, error)
}

// sweepBatch is how many blobs the orphan sweep looks up at once.
const sweepBatch = 500

// SweepBlobs removes the blobs of blobs last written more than grace ago
// that no row of db references (the blobs of rolled-back transactions,
// and of rows retention or an operator removed), and returns how many it
// removed. Keys not of the form claimcheck.Key makes are left alone.
func SweepBlobs(ctx context.Context, db refStore, blobs claimcheck.Store, grace time.Duration) (int, error) {
	removed := 0
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		ids := make([]string, len(batch))
		for i, k := range batch {
			ids[i], _ = claimcheck.MessageID(k)
		}
		refs, err := db.ClaimRefs(ctx, ids)
		if err != nil {
			return err
		}
		scheme := blobs.Scheme() + ":"
		for _, k := range batch {
			if refs[scheme+k] {
				continue
			}
			if err := blobs.Delete(ctx, k); err != nil {
				return err
			}
			removed++
		}
		batch = batch[:0]
		return nil
	}
	err := blobs.List(ctx, time.Now().Add(-grace), func(key string) error {
		if id, ok := claimcheck.MessageID(key); !ok || !uuidShaped(id) {
			return nil
		}
		batch = append(batch, key)
		if len(batch) >= sweepBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return removed, err
}

// uuidShaped: 8-4-4-4-12 hexadecimal digits.
func uuidShaped(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// blobSweeper runs the orphan sweep from the retention loop, at most
// every grace/4 (between the retention interval and maxBlobSweepEvery).
type blobSweeper struct {
	last    time.Time
	failing bool
}

// maybeSweepBlobs runs the orphan sweep when one is due.
func (r *Relay) maybeSweepBlobs(ctx context.Context, rt retention, s *blobSweeper) {
	grace := r.cfg.ClaimCheckGrace
	if r.cfg.ClaimCheck == nil || grace < 0 {
		return
	}
	db, ok := r.store.(refStore)
	if !ok {
		return
	}
	every := min(max(grace/4, rt.interval), maxBlobSweepEvery)
	if !s.last.IsZero() && time.Since(s.last) < every {
		return
	}
	s.last = time.Now()
	n, err := SweepBlobs(ctx, db, r.cfg.ClaimCheck, grace)
	switch {
	case err != nil && ctx.Err() == nil && !s.failing:
		s.failing = true
		r.log.Error("outbox relay: the claim-check orphan sweep failed; trying again later", "relay", r.id, "err", redact.Text(oneLine(err.Error())))
	case err == nil && s.failing:
		s.failing = false
		r.log.Info("outbox relay: the claim-check orphan sweep recovered", "relay", r.id)
	}
	if n > 0 {
		r.log.Debug("outbox relay: claim-check orphan sweep", "relay", r.id, "removed", n)
	}
}
