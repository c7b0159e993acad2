package store

import (
	"context"
	"fmt"

	"github.com/txoutbox/outbox/driver"
)

// InsertThen is Insert that calls done once the rows are written: when
// Insert returns, or, through a driver.Queuer, when the caller reads the results
// of its batch (then only if every row went in). A queued insert that
// finds its message id taken fails the batch with an error wrapping dup
// (the caller's sentinel for it) and naming the id; Insert reports a
// *DuplicateError.
func (st *Store) InsertThen(ctx context.Context, q Querier, msgs []NewMessage, done func(), dup error) error {
	if qu, ok := q.(driver.Queuer); ok {
		return st.queueInsert(qu, msgs, done, dup)
	}
	if err := st.Insert(ctx, q, msgs); err != nil {
		return err
	}
	done()
	return nil
}

// queueInsert queues one single-row insert per message on q. The
// multi-row form reports duplicates by the ids it returns, rows a batch
// gives back only once sent; in one batch the statements share one round
// trip anyway, and each is the statement Enqueue of one message runs.
func (st *Store) queueInsert(q driver.Queuer, msgs []NewMessage, done func(), dup error) error {
	if st.d != Postgres {
		return fmt.Errorf("a batched insert needs PostgreSQL, not %s", st.d)
	}
	for i := range msgs {
		m := &msgs[i]
		stmt, id, last := st.s.insertOne, m.MessageID, i == len(msgs)-1
		if m.FreshID {
			stmt = st.s.insertFresh
		}
		q.QueueExec(stmt, st.dl.insertOneArgs(m), func(n int64) error {
			if n == 0 {
				return fmt.Errorf("outbox: %w: %s", dup, id)
			}
			if last {
				done()
			}
			return nil
		})
		switch {
		case !m.ExpiresAt.IsZero():
			q.QueueExec(expirySQL, []any{m.ExpiresAt, m.MessageID}, func(int64) error { return nil })
		case m.ExpiresIn > 0:
			q.QueueExec(expiryInSQL, []any{m.ExpiresIn.Microseconds(), m.MessageID}, func(int64) error { return nil })
		}
	}
	return nil
}
