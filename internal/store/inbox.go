package store

import (
	"context"
	"errors"
	"time"
)

// The consumer side: the inbox's claims and their purge, and a message
// marked consumed.

// InboxClaim records messageID for consumer through q (the consumer's
// transaction) and reports whether this is its first record. A deadlock
// is the caller's to retry, with its whole transaction.
func (st *Store) InboxClaim(ctx context.Context, q Querier, consumer, messageID string) (bool, error) {
	n, err := q.Exec(ctx, st.s.inboxClaim, consumer, messageID)
	return n == 1, err
}

// InboxPurge deletes consumer's records older than age, at most limit at a
// time on databases that allow it, and returns how many it deleted.
func (st *Store) InboxPurge(ctx context.Context, consumer string, age time.Duration) (int64, error) {
	return st.ExecRetry(ctx, st.s.inboxPurge, consumer, age.Microseconds())
}

// MarkConsumed moves the sent message messageID to consumed (idempotent
// for one already consumed) and returns its status before the call:
// "" when no such message exists.
func (st *Store) MarkConsumed(ctx context.Context, messageID string) (string, error) {
	changed, err := st.ConsumeOne(ctx, messageID)
	var se *StatusError
	switch {
	case errors.Is(err, ErrNotFound):
		return "", nil
	case errors.As(err, &se):
		return se.Status, nil
	case err != nil:
		return "", err
	case changed:
		return StatusSent, nil
	}
	return StatusConsumed, nil
}
