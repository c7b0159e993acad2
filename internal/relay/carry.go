package relay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/store"
)

// Carried settles.
//
// At an everyday rate a round carries a message or two, and its settle
// was a statement and a commit of its own, as many as the reads. Where the
// store can settle and read in one statement (PostgreSQL,
// outbox_settle_read_mark), the outcomes of a small round are carried to
// the next read instead: the settle runs first in that statement, so the
// read sees it (a row settled sent is not read again, a key's next message
// comes once its head is settled). A carried settle is written on its own
// before any wait longer than carryFor, before partitions are released,
// before a read that cannot take it (while isolating suspects) and when
// the worker stops, so it is never held back for longer than a short
// wait; a crash while it is carried redelivers that round, as a crash
// between a publish and its settle always did.
//
// Only worker 0 carries, and only over rounds that leave the partitions
// where they are: in a solo round that stays solo (no other worker reads
// until a solo round is big, and a big round carries nothing), or when it
// is the only worker.

// carryFor is the longest wait a carried settle waits through.
const carryFor = 50 * time.Millisecond

// settleReader is a Store that may have one statement for a settle and
// the next read: SettlesWithRead says whether it does.
type settleReader interface {
	SettlesWithRead() bool
	SettleReadMark(ctx context.Context, owner string, outs []store.Outcome, parts []int, limit int) ([]store.Row, int64, error)
}

// settleReaderOf is st as a settleReader, nil when it has no combined
// statement.
func settleReaderOf(st Store) settleReader {
	if sr, ok := st.(settleReader); ok && sr.SettlesWithRead() {
		return sr
	}
	return nil
}

// carried is a round's settle held for the next read.
type carried struct {
	outs   []store.Outcome
	items  []*item
	report BatchReport
}

// carry holds the relay's carried settle, if any.
type carry struct {
	sr      settleReader // nil: the store settles and reads apart
	mu      sync.Mutex
	pending *carried
}

// mayCarry reports whether worker w may carry the settle of the round
// that read n messages.
func (r *Relay) mayCarry(ctx context.Context, w *worker, n int) bool {
	return r.carry.sr != nil && ctx.Err() == nil && w.index == 0 && (r.cfg.Workers == 1 || (w.solo && n < soloUntil))
}

// hold carries c to the next read.
func (r *Relay) hold(c *carried) {
	r.carry.mu.Lock()
	r.carry.pending = c
	r.carry.mu.Unlock()
}

// takeCarried returns the carried settle, if any, and clears it.
func (r *Relay) takeCarried() *carried {
	r.carry.mu.Lock()
	defer r.carry.mu.Unlock()
	c := r.carry.pending
	r.carry.pending = nil
	return c
}

// flushCarried writes the carried settle on its own, if there is one.
func (r *Relay) flushCarried(ctx context.Context) error {
	c := r.takeCarried()
	if c == nil {
		return nil
	}
	return r.settleOnly(ctx, c)
}

// settleAndRead settles c and reads the next batch of parts in one
// statement. When that statement fails, c is settled on its own and the
// read is left to the caller (ok false).
func (r *Relay) settleAndRead(ctx context.Context, c *carried, parts []int, limit int) (rows []store.Row, ok bool, err error) {
	if err := failpoint.Inject(failpoint.BeforeSettle); err != nil {
		return nil, false, settleFailed(err)
	}
	rctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	rows, n, err := r.carry.sr.SettleReadMark(rctx, r.id, c.outs, parts, limit)
	cancel()
	if err != nil {
		// Neither the settle nor the read happened: the settle is
		// retried on its own, and the read is the caller's.
		return nil, false, r.settleOnly(ctx, c)
	}
	c.report.Settled = n
	r.afterSettle(c.outs, c.items, c.report)
	return rows, true, nil
}

// settleOnly writes c's outcomes with the plain settle.
func (r *Relay) settleOnly(ctx context.Context, c *carried) error {
	n, err := r.settle(ctx, c.outs)
	if err != nil {
		return settleFailed(err)
	}
	c.report.Settled = n
	r.afterSettle(c.outs, c.items, c.report)
	return nil
}

// settleFailed is the error of a round whose outcomes were not written.
func settleFailed(err error) error {
	return dbFailed(dbSettle, fmt.Errorf("settle: %w (the batch will be delivered again)", err))
}
