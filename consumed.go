package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/txoutbox/outbox/internal/store"
)

// ErrNotSent: the message exists but has not been confirmed sent yet
// (pending, or dead), so it cannot be marked consumed. A consumer that got
// it before the relay recorded the send may retry shortly.
var ErrNotSent = errors.New("message not sent")

// MarkConsumed records at the producer's side that a consumer has
// processed the message: status sent → consumed, with consumed_at set.
// Marking a consumed message again is a no-op. It returns ErrNotFound for
// an unknown id and ErrNotSent for one not yet confirmed sent.
//
// Consumers that can reach the producer's database call it directly;
// others use the relay's admin API (POST /api/v1/messages/{id}/consumed).
func MarkConsumed[TTx any](ctx context.Context, driver Driver[TTx], messageID string) error {
	b, err := backendOf("MarkConsumed", driver)
	if err != nil {
		return err
	}
	before, err := b.Store.MarkConsumed(ctx, strings.ToLower(messageID))
	switch {
	case err != nil:
		return fmt.Errorf("outbox: mark consumed %s: %w", messageID, err)
	case before == "":
		return fmt.Errorf("outbox: mark consumed %s: %w", messageID, ErrNotFound)
	case before != store.StatusSent && before != store.StatusConsumed:
		return fmt.Errorf("outbox: mark consumed %s (status %s): %w", messageID, before, ErrNotSent)
	}
	return nil
}
