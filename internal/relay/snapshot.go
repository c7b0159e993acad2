package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// The snapshot read (Config.SnapshotRead, PostgreSQL).
//
// Each round reads the rows that committed between the cursor of each of
// its partitions (a transaction snapshot) and a newer snapshot, and a row
// delivered from there is not written: its partition's cursor passing it
// records it. What cannot go now, or failed, is written to the table
// domain (see store's enable.sql), which a round reads first, by status
// and time as the table read does, when it may hold something due.
//
// A cursor moves only once its round is settled, so a crash, a failed
// settle or a lost lease delivers the round again, never loses it. The
// cursors are recorded on the leases every lease tick and when a
// partition is released; a relay that takes a partition its owner did
// not release moves the rows after the recorded cursor to the table
// domain and reads them as suspects (see isolate), starting its cursor
// at the snapshot it took over at.

// snapshotStore is the store of a relay that reads by snapshots.
type snapshotStore interface {
	SnapshotReadEnabled(ctx context.Context) (bool, error)
	SnapshotResume(ctx context.Context, owner string, parts []int, spill []bool, limit int) ([]store.SnapshotCursor, []int64, error)
	SnapshotRead(ctx context.Context, owner string, cursors []store.SnapshotCursor, keep []int, limit int) (store.SnapshotPage, error)
	SaveSnapshotCursors(ctx context.Context, owner string, cursors []store.SnapshotCursor) error
	ReadRetries(ctx context.Context, owner string, parts []int, limit int) ([]store.Row, error)
	SettleSnapshot(ctx context.Context, owner string, outs []store.Outcome) (int64, error)
	ExpireTable(ctx context.Context, owner string) (int64, error)
}

var _ snapshotStore = (*store.Store)(nil)

// retryPoll is how often a relay reading by snapshots reads the table
// domain when it knows of nothing due there: rows another relay left, an
// operator requeued, or that were delayed.
const retryPoll = time.Second

// snapState is a relay's snapshot read: the cursors of the partitions it
// holds, as of their last settled round.
type snapState struct {
	st snapshotStore

	mu      sync.Mutex
	cursors map[int]store.SnapshotCursor
	// unclean are partitions newly held from an owner that did not
	// release them, to be resumed with their rows moved (see resume).
	unclean map[int]bool
	// saved are the cursors as last recorded on the leases.
	saved map[int]store.SnapshotCursor
	// dirty are the partitions whose settled rounds delivered something
	// since their cursor was last recorded.
	dirty map[int]bool
	// retryAt is when the table domain is next read (zero: now); dues
	// are when the retries this relay wrote fall due (the earliest
	// maxDues, in order): a read before then finds them still waiting.
	retryAt time.Time
	dues    []time.Time
}

// maxDues bounds the retry times a relay keeps in mind; later ones wait
// for retryPoll at most.
const maxDues = 64

func newSnapState(st snapshotStore) *snapState {
	return &snapState{st: st, cursors: map[int]store.SnapshotCursor{}, unclean: map[int]bool{}, saved: map[int]store.SnapshotCursor{}, dirty: map[int]bool{}}
}

// checkSnapshotRead refuses a start whose read path does not match the
// database's: a table read over a database read by snapshots would
// deliver every message the snapshot read delivered again.
func (r *Relay) checkSnapshotRead(ctx context.Context) error {
	ss, ok := r.store.(snapshotStore)
	if !ok {
		if r.cfg.SnapshotRead {
			return errors.New("the snapshot read needs the PostgreSQL outbox table")
		}
		return nil
	}
	on, err := ss.SnapshotReadEnabled(ctx)
	switch {
	case err != nil:
		return err
	case r.cfg.SnapshotRead && !on:
		return errors.New("the snapshot read is not enabled on this database")
	case !r.cfg.SnapshotRead && on:
		return errors.New("this database's outbox is read by snapshots (outbox_messages.outbox_txid); a relay reading the table would deliver its messages again")
	}
	if on {
		if st, ok := r.store.(*store.Store); ok {
			// Gauges and retention take a delivered row for sent.
			st = st.WithSnapshotRead()
			r.store, ss = st, st
		}
		r.snap = newSnapState(ss)
	}
	return nil
}

// held notes the partitions the relay holds now: a partition new to it
// is resumed from its lease before it is read (moving its rows when
// unclean), one it no longer holds is forgotten unless it is being
// released (its cursor is recorded first).
func (s *snapState) held(leases []store.Lease, now []int, releasing map[int]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.cursors {
		if !slices.Contains(now, p) && !releasing[p] {
			delete(s.cursors, p)
			delete(s.saved, p)
			delete(s.dirty, p)
		}
	}
	for _, l := range leases {
		if _, ok := s.cursors[l.Partition]; !ok && slices.Contains(now, l.Partition) {
			s.unclean[l.Partition] = l.Unclean
		}
	}
}

// forget drops parts' cursors (released).
func (s *snapState) forget(parts []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		delete(s.cursors, p)
		delete(s.saved, p)
		delete(s.unclean, p)
		delete(s.dirty, p)
	}
}

// cursorsFor returns the cursors of parts, resuming those the relay has
// none of yet.
func (r *Relay) cursorsFor(ctx context.Context, parts []int) ([]store.SnapshotCursor, error) {
	s := r.snap
	s.mu.Lock()
	var missing []int
	var spill []bool
	for _, p := range parts {
		if _, ok := s.cursors[p]; !ok {
			missing = append(missing, p)
			spill = append(spill, s.unclean[p])
		}
	}
	s.mu.Unlock()
	if len(missing) > 0 {
		cs, marks, err := s.st.SnapshotResume(ctx, r.id, missing, spill, r.cfg.BatchSize)
		if err != nil {
			return nil, dbFailed(dbMark, fmt.Errorf("resume the snapshot read: %w", err))
		}
		r.own.mu.Lock()
		for i, c := range cs {
			if marks[i] > r.own.suspect[c.Partition] {
				if r.own.suspect == nil {
					r.own.suspect = map[int]int64{}
				}
				r.own.suspect[c.Partition] = marks[i]
			}
		}
		r.own.mu.Unlock()
		s.mu.Lock()
		for _, c := range cs {
			s.cursors[c.Partition] = c
			s.saved[c.Partition] = c
			delete(s.unclean, c.Partition)
		}
		s.retryAt = time.Time{}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.SnapshotCursor, 0, len(parts))
	for _, p := range parts {
		if c, ok := s.cursors[p]; ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// readSnapshotRound reads a round: the table domain's due rows when it
// may hold some, then the snapshot domain after the cursors of parts, up
// to w's batch. The cursors the round moves to are w.page, for
// advanceCursors once it is settled. It returns the rows to deliver and
// how many rows it read in all (rows moved to the table domain too).
func (r *Relay) readSnapshotRound(ctx context.Context, w *worker, parts []int, isolating bool) ([]store.Row, int, error) {
	w.page, w.delivered = nil, nil
	s := r.snap
	cs, err := r.cursorsFor(ctx, parts)
	if err != nil {
		return nil, 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	defer cancel()
	readStart := time.Now()
	if r.metrics != nil {
		defer func() { r.metrics.readDur.Observe(time.Since(readStart).Seconds()) }()
	}
	var rows []store.Row
	s.mu.Lock()
	due := isolating || !readStart.Before(s.retryAt) || (len(s.dues) > 0 && !readStart.Before(s.dues[0]))
	s.mu.Unlock()
	if due {
		rows, err = s.st.ReadRetries(rctx, r.id, parts, w.batchSize)
		if err != nil {
			return nil, 0, dbFailed(dbRead, fmt.Errorf("read the table domain: %w", err))
		}
		next := readStart.Add(retryPoll)
		if len(rows) == w.batchSize {
			next = readStart
		}
		s.mu.Lock()
		s.retryAt = next
		n := 0
		for n < len(s.dues) && !s.dues[n].After(readStart) {
			n++
		}
		s.dues = s.dues[n:]
		s.mu.Unlock()
	}
	read := len(rows)
	left := w.batchSize - len(rows)
	if left <= 0 || len(cs) == 0 || (isolating && r.hasSuspects(rows)) {
		// Suspects go first, alone (see isolate).
		return rows, read, nil
	}
	// The read records the cursors of the partitions that delivered
	// something since they were last recorded, so that a crash costs
	// about a round of duplicates.
	var keep []int
	s.mu.Lock()
	for _, c := range cs {
		if s.dirty[c.Partition] {
			keep = append(keep, c.Partition)
		}
	}
	s.mu.Unlock()
	page, err := s.st.SnapshotRead(rctx, r.id, cs, keep, left)
	if err != nil {
		return nil, 0, dbFailed(dbRead, fmt.Errorf("read: %w", err))
	}
	s.mu.Lock()
	for _, c := range cs {
		if slices.Contains(keep, c.Partition) {
			delete(s.dirty, c.Partition)
			if _, ok := s.cursors[c.Partition]; ok {
				s.saved[c.Partition] = c
			}
		}
	}
	s.mu.Unlock()
	if page.Read > len(page.Rows) {
		// Rows moved to the table domain: read it next round.
		s.mu.Lock()
		s.retryAt = time.Time{}
		s.mu.Unlock()
	}
	w.page = page.Cursors
	w.delivered = map[int]bool{}
	for _, row := range page.Rows {
		w.delivered[row.Partition] = true
	}
	return append(rows, page.Rows...), read + page.Read, nil
}

// hasSuspects reports whether rows hold a suspect (see isolate).
func (r *Relay) hasSuspects(rows []store.Row) bool {
	marks := r.own.suspects()
	for _, row := range rows {
		if !row.Snapshot && row.ID <= marks[row.Partition] {
			return true
		}
	}
	return false
}

// advanceCursors moves the cursors of w's settled round, of the
// partitions the relay still holds.
func (r *Relay) advanceCursors(w *worker) {
	if r.snap == nil || w.page == nil {
		return
	}
	s := r.snap
	s.mu.Lock()
	for _, c := range w.page {
		if _, ok := s.cursors[c.Partition]; ok {
			s.cursors[c.Partition] = c
		}
	}
	for p := range w.delivered {
		if _, ok := s.cursors[p]; ok {
			s.dirty[p] = true
		}
	}
	s.mu.Unlock()
	w.page, w.delivered = nil, nil
}

// noteRetries notes when the retries among the outcomes written fall
// due: the table domain is read then (at once for one due now).
func (s *snapState) noteRetries(outs []store.Outcome) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range outs {
		switch {
		case o.Status != store.StatusPending:
		case o.Delay <= 0:
			s.retryAt = time.Time{}
		default:
			at := now.Add(o.Delay)
			i, _ := slices.BinarySearchFunc(s.dues, at, time.Time.Compare)
			if i < maxDues {
				s.dues = slices.Insert(s.dues, i, at)[:min(len(s.dues)+1, maxDues)]
			}
		}
	}
}

// saveCursors records the cursors of parts (nil: every partition held)
// that moved since they were last recorded.
func (r *Relay) saveCursors(ctx context.Context, parts []int) error {
	if r.snap == nil {
		return nil
	}
	s := r.snap
	s.mu.Lock()
	var todo []store.SnapshotCursor
	for p, c := range s.cursors {
		if (parts == nil || slices.Contains(parts, p)) && s.saved[p] != c {
			todo = append(todo, c)
		}
	}
	s.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	slices.SortFunc(todo, func(a, b store.SnapshotCursor) int { return a.Partition - b.Partition })
	sctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	defer cancel()
	if err := s.st.SaveSnapshotCursors(sctx, r.id, todo); err != nil {
		return err
	}
	s.mu.Lock()
	for _, c := range todo {
		if _, ok := s.cursors[c.Partition]; ok {
			s.saved[c.Partition] = c
		}
	}
	s.mu.Unlock()
	return nil
}

// heldOver adds to decided, the items of a round with an outcome, the
// items of the snapshot domain it left without one (a later message of a
// key whose message failed, which sits out the rest of the round): their
// cursor passes them, so they move to the table domain, due now and held
// back there by the failed message of their key.
func heldOver(items, decided []*item, rep *BatchReport) []*item {
	if len(decided) == len(items) {
		return decided
	}
	out := slices.Clone(decided)
	for _, it := range items {
		if it.row.Snapshot && !it.decided && !it.expired {
			it.decided = true
			it.out = store.Outcome{ID: it.row.ID, Status: store.StatusPending, Unknown: it.uncertain()}
			rep.Skipped--
			rep.Deferred++
			out = append(out, it)
		}
	}
	return out
}

// snapshotOutcomes leaves out of outs (for decided) the deliveries of
// rows of the snapshot domain: their cursor records them.
func snapshotOutcomes(outs []store.Outcome, decided []*item) []store.Outcome {
	kept := outs[:0:0]
	for i, it := range decided {
		if it.row.Snapshot && outs[i].Status == store.StatusSent {
			continue
		}
		kept = append(kept, outs[i])
	}
	return kept
}
