package relay

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/store"
)

// work is one worker's read-publish-settle loop.
func (r *Relay) work(ctx context.Context, w *worker, local <-chan struct{}) {
	defer func() {
		if err := r.flushCarried(ctx); err != nil {
			r.log.Warn("outbox relay: settling the last round failed; its messages will be delivered again", "relay", r.id, "err", err)
		}
	}()
	p := pace{poll: r.cfg.MinPollInterval, errDelay: errDelayFrom, gather: true}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		byWake := p.woken
		p.woken = false
		solo, ok := r.gate.enter(ctx, w.index)
		if !ok {
			return
		}
		if !r.takeShare(ctx) {
			r.gate.leave(w.index, 0, solo, nil)
			return
		}
		w.solo = solo
		n, err := r.round(ctx, w)
		r.giveShare()
		r.dbRound(ctx, err)
		if n > 0 || err != nil {
			r.activity.Add(1)
		}
		r.gate.leave(w.index, n, solo, w.counts)
		if ctx.Err() != nil {
			return
		}
		wait, gather := r.afterRound(&p, n, err, solo, byWake)
		if gather {
			if !sleepCtx(ctx, min(gatherWindow, r.cfg.MinPollInterval)) {
				return
			}
			p.gathered = true
			continue
		}
		if wait == 0 {
			continue
		}
		if wait > carryFor {
			if err := r.flushCarried(ctx); err != nil {
				r.dbRound(ctx, err)
				r.log.Error("outbox relay: round failed; retrying", "relay", r.id, "err", err)
				p.failing = true
			}
		}
		timer.Reset(onGrid(wait))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-w.wake:
			p.poll, p.woken = r.cfg.MinPollInterval, true
		case <-local:
			p.poll, p.woken = r.cfg.MinPollInterval, true
		}
	}
}

// errDelayFrom is the wait after a round fails; it doubles for each
// failure in a row, up to 5 s.
const errDelayFrom = 100 * time.Millisecond

// pace is a worker's loop state from one round to the next, from which
// afterRound picks the wait before the next round.
type pace struct {
	// poll is the wait after an empty round: it doubles up to
	// MaxPollInterval, and a round that found messages or a wake-up
	// brings it back to MinPollInterval.
	poll time.Duration
	// errDelay is the wait after a failed round; failing: the failure
	// was logged, and is not again until a round works.
	errDelay time.Duration
	failing  bool
	// gather: after a small solo round, read again gatherWindow later
	// (what arrived meanwhile), rather than wait for a wake-up or the
	// poll. Such a read that finds nothing stops it: at a trickle each
	// one is an empty read per message; a round that finds more than one
	// message (things arrive faster than rounds) starts it again.
	// gathered: the round that just ran was such a read.
	gather, gathered bool
	// woken: the round about to run was started by a wake-up (a
	// producer's signal, or one in this process).
	woken bool
}

// afterRound updates p with the round that ran (n messages, -1 when the
// worker owns no partition, or err) and returns the wait before the next
// round (0: none), or gather: read again after gatherWindow instead. solo
// says the round read every owned partition, byWake that a wake-up
// started it.
func (r *Relay) afterRound(p *pace, n int, err error, solo, byWake bool) (wait time.Duration, gather bool) {
	switch {
	case p.gathered && n == 0:
		p.gather = false
	case n > 1:
		p.gather = true
	}
	p.gathered = false
	switch {
	case err != nil:
		if !p.failing {
			r.log.Error("outbox relay: round failed; retrying", "relay", r.id, "err", err)
			p.failing = true
		}
		wait, p.errDelay = p.errDelay, min(p.errDelay*2, 5*time.Second)
	case n < 0: // nothing owned
		p.failing, p.errDelay = false, errDelayFrom
		wait = r.cfg.LeaseTTL / 5
	case n == 0:
		p.failing, p.errDelay = false, errDelayFrom
		wait, p.poll = p.poll, min(p.poll*2, r.cfg.MaxPollInterval)
	default:
		p.failing, p.errDelay = false, errDelayFrom
		p.poll = r.cfg.MinPollInterval
		if solo && r.gate.isSolo() {
			// A small round alone: gather what arrives for a moment
			// rather than read again for a message or two; or, when such
			// reads found nothing lately, wait for a wake-up or the poll
			// as after an empty round.
			if p.gather {
				return 0, true
			}
			wait = p.poll
			if byWake {
				// A producer's signal started it, and its next signal
				// will start the next one: the read after wokenFollowUp
				// only looks for a commit that landed after the signal,
				// since producers signal NotifyInterval after Enqueue,
				// not after the commit. At a trickle that read finds
				// nothing nearly every time, and the empty reads after
				// it double from there.
				wait = min(wokenFollowUp*p.poll, r.cfg.MaxPollInterval)
				p.poll = min(2*wait, r.cfg.MaxPollInterval)
			}
		}
	}
	return wait, false
}

// takeShare waits for a slot of the rounds shared with other relays (the
// databases of a fleet), when there is such a limit; false when ctx ended
// first. Waiting rounds get slots in the order they asked, so a database
// with a backlog takes its turn with the others instead of their place.
func (r *Relay) takeShare(ctx context.Context) bool {
	if r.cfg.Share == nil {
		return true
	}
	select {
	case r.cfg.Share <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// giveShare returns takeShare's slot.
func (r *Relay) giveShare() {
	if r.cfg.Share != nil {
		<-r.cfg.Share
	}
}

// round reads one batch of w's partitions, delivers it and settles it. It
// returns how many messages it read, or -1 when w owns no partition. A
// panic in it is its error (see containRound).
func (r *Relay) round(ctx context.Context, w *worker) (count int, failed error) {
	defer r.containRound(&count, &failed)
	r.own.round.RLock()
	defer r.own.round.RUnlock()
	all, ok := r.own.snapshot()
	r.noteLeases(len(all) > 0, ok)
	if !ok {
		return -1, r.flushCarried(ctx)
	}
	if r.router.allPaused() {
		// Every destination is down: reading would only defer the
		// batch again. The first round after a pause ends sends the probe.
		return 0, r.flushCarried(ctx)
	}
	parts := make([]int, 0, len(all)/r.cfg.Workers+1)
	for _, p := range all {
		if w.solo || r.gate.worker(p) == w.index {
			parts = append(parts, p)
		}
	}
	w.counts = nil
	if len(parts) == 0 {
		return -1, r.flushCarried(ctx)
	}
	// The in-flight marks are written by the read itself, but while
	// suspects are being isolated: a batch cut down to them is marked as
	// cut (markInflight below), so that each crash halves their group.
	isolating := r.own.suspects() != nil
	var rows []store.Row
	var err error
	moved := 0
	if r.snap != nil {
		var read int
		rows, read, err = r.readSnapshotRound(ctx, w, parts, isolating)
		moved = read - len(rows)
	} else {
		rows, err = r.readRound(ctx, w, parts, isolating)
	}
	if err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		r.advanceCursors(w)
		w.batchSize = max(r.cfg.MinBatchSize, w.batchSize/2)
		// Rows moved to the table domain are read from there next.
		return moved, nil
	}
	if w.solo {
		w.counts = map[int]int{}
		for _, row := range rows {
			w.counts[row.Partition]++
		}
	}
	report := BatchReport{Read: len(rows), BatchSize: w.batchSize}
	if r.metrics != nil {
		r.metrics.batch.Observe(float64(len(rows)))
	}
	switch {
	case len(rows) == w.batchSize:
		w.batchSize = min(r.cfg.BatchSize, w.batchSize*2)
	case len(rows) < w.batchSize/4:
		w.batchSize = max(r.cfg.MinBatchSize, w.batchSize/2)
	}
	nread := len(rows)
	rows, suspects, alone := r.isolate(rows)
	if suspects {
		r.isolating.Lock()
		defer r.isolating.Unlock()
		// The rows cut off are read again: the cursors stay.
		w.page = nil
	}
	if isolating {
		if err := r.markInflight(ctx, parts, rows); err != nil {
			return 0, dbFailed(dbMark, fmt.Errorf("mark in-flight: %w", err))
		}
	}
	items, ok, err := r.prepareRound(ctx, rows, alone)
	if err != nil {
		return 0, err
	}
	if !ok {
		return nread, nil
	}
	r.expireOld(ctx, items)
	if err := failpoint.Inject(failpoint.AfterReadBeforePublish); err != nil {
		return 0, err
	}
	var read []*item
	if r.snap != nil {
		read = slices.Clone(items) // deliver keeps the decided ones in items
	}
	decided := r.deliver(ctx, items, &report)
	if r.snap != nil {
		decided = heldOver(read, decided, &report)
	}
	if err := failpoint.Inject(failpoint.AfterPublishBeforeSettle); err != nil {
		return nread, err
	}
	return r.settleRound(ctx, w, decided, report, nread, len(rows), !isolating && !suspects && r.snap == nil)
}

// readRound settles the round before, when its settle was carried, and
// reads the next batch of parts: with the settle in one statement when
// the store can, and marking the rows in flight (ReadMark) unless
// suspects are being isolated. A failed carried settle is returned as it
// is, a failed read as a read failure of the database.
func (r *Relay) readRound(ctx context.Context, w *worker, parts []int, isolating bool) ([]store.Row, error) {
	readStart := time.Now()
	var rows []store.Row
	var err error
	read := false
	if c := r.takeCarried(); c != nil {
		if isolating {
			err = r.settleOnly(ctx, c)
		} else {
			rows, read, err = r.settleAndRead(ctx, c, parts, w.batchSize)
		}
		if err != nil {
			return nil, err
		}
	}
	if !read {
		rctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
		if isolating {
			rows, err = r.store.Read(rctx, parts, w.batchSize)
		} else {
			rows, err = r.store.ReadMark(rctx, r.id, parts, w.batchSize)
		}
		cancel()
	}
	if r.metrics != nil {
		r.metrics.readDur.Observe(time.Since(readStart).Seconds())
	}
	if err != nil {
		return nil, dbFailed(dbRead, fmt.Errorf("read: %w", err))
	}
	return rows, nil
}

// prepareRound prepares the round's rows. A suspect read alone is
// charged its attempt before it is prepared, so that a row that kills the
// process while it is decoded runs out of attempts as one whose publish
// does; false when it cannot be charged (it is no longer the relay's).
func (r *Relay) prepareRound(ctx context.Context, rows []store.Row, alone bool) ([]*item, bool, error) {
	items := make([]*item, len(rows))
	if alone {
		it, ok, err := r.charge(ctx, &rows[0])
		if err != nil {
			return nil, false, dbFailed(dbMark, fmt.Errorf("charge suspect: %w", err))
		}
		if !ok {
			return nil, false, nil
		}
		items[0] = it
	}
	budget := &blobBudget{}
	for i := range rows {
		switch {
		case items[i] == nil:
			items[i] = r.prepareContained(&rows[i], budget)
		case !items[i].decided:
			// A charged suspect: prepared with its attempt recorded.
			it := r.prepareContained(&rows[i], budget)
			it.charged = true
			if it.env != nil {
				it.env.Attempt = rows[i].Attempts
			}
			items[i] = it
		}
	}
	return items, true, nil
}

// settleRound records the outcomes of the decided items of a round that
// read nread rows (kept of them delivered), or, when carry allows and
// mayCarry agrees, holds them to be settled with the worker's next read.
// It returns what round returns.
func (r *Relay) settleRound(ctx context.Context, w *worker, decided []*item, report BatchReport, nread, kept int, carry bool) (int, error) {
	var outs []store.Outcome
	if len(decided) > 0 {
		outs = make([]store.Outcome, len(decided))
		for i, it := range decided {
			outs[i] = it.out
			outs[i].Partition = it.row.Partition
			if it.charged {
				outs[i].CountAttempt = false
			}
		}
		if carry && r.mayCarry(ctx, w, nread) {
			r.hold(&carried{outs: outs, items: decided, report: report})
			return nread, nil
		}
		write := outs
		if r.snap != nil {
			write = snapshotOutcomes(outs, decided)
		}
		settled, err := r.settle(ctx, write)
		report.Settled = settled + int64(len(outs)-len(write))
		if err != nil {
			return kept, settleFailed(err)
		}
		if r.snap != nil {
			r.snap.noteRetries(write)
			if settled < int64(len(write)) {
				// An outcome the database refused (the lease lapsed)
				// was not moved to the table domain: the cursors stay,
				// and the round is read again.
				w.page = nil
			}
		}
	}
	r.advanceCursors(w)
	r.afterSettle(outs, decided, report)
	return nread, nil
}

// afterSettle finishes a settled round: the warning for outcomes of
// partitions no longer held, the metrics and dead-letter alerts, OnBatch.
func (r *Relay) afterSettle(outs []store.Outcome, decided []*item, report BatchReport) {
	if want := int64(len(outs)); report.Settled < want {
		r.log.Warn("outbox relay: some outcomes were not recorded: partition moved to another relay", "relay", r.id, "expected", want, "settled", report.Settled)
	}
	if len(decided) > 0 {
		r.recorded(decided)
	}
	if r.cfg.OnBatch != nil {
		r.cfg.OnBatch(report)
	}
}

// markInflight records, for each of the worker's partitions, the highest
// id about to be published from it (0: none), so that a relay taking a
// partition over after a crash knows which messages may have reached
// their destination (the Checker is asked about them) or may have crashed
// the relay (see isolate).
func (r *Relay) markInflight(ctx context.Context, parts []int, rows []store.Row) error {
	mctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	defer cancel()
	return r.store.MarkInflight(mctx, r.id, parts, store.MaxIDs(parts, rows))
}

// statementTimeout bounds each of the relay's statements but the settle
// (which has its own): an answer lost in the network — a connection
// cut without a reset, a half-open path — would otherwise hold a worker
// or the lease loop forever. The relay retries on a fresh connection.
func (r *Relay) statementTimeout() time.Duration {
	return max(2*r.cfg.LeaseTTL, 5*time.Second)
}

// settle writes outcomes, retrying a failed statement (a lost connection,
// a timeout) while the leases last: a batch that was published but not
// recorded is delivered again. Deadlocks are the store's to retry; one it
// gave up on is not run again here.
func (r *Relay) settle(ctx context.Context, outs []store.Outcome) (int64, error) {
	if r.metrics != nil {
		defer func(start time.Time) { r.metrics.settleDur.Observe(time.Since(start).Seconds()) }(time.Now())
	}
	if err := failpoint.Inject(failpoint.BeforeSettle); err != nil {
		return 0, err
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		var n int64
		if r.snap != nil {
			n, err = r.snap.st.SettleSnapshot(sctx, r.id, outs)
		} else {
			n, err = r.store.Settle(sctx, r.id, outs)
		}
		cancel()
		if err == nil {
			return n, nil
		}
		if !r.own.valid() || store.Retried(err) {
			break
		}
		time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
	}
	return 0, err
}

// sleepCtx waits d and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Idle waits end on a grid.
//
// A process serving many databases runs a poll and a lease loop for each;
// left alone their timers fire at scattered instants, and each one wakes
// the process from idle (an OS thread woken, the scheduler spinning, the
// runtime's monitor kept busy) to run a few microseconds of work. Waits
// of idleGridFrom or more are stretched to end on a multiple of idleGrid
// of the wall clock, so that the loops of every database come due
// together and one wake-up runs them all.
const (
	idleGrid     = 100 * time.Millisecond
	idleGridFrom = 2 * idleGrid
)

// onGrid is d, stretched by less than idleGrid to end on the grid when it
// is long enough to be an idle wait.
func onGrid(d time.Duration) time.Duration {
	if d < idleGridFrom {
		return d
	}
	end := time.Now().Add(d).UnixNano()
	return d + time.Duration((int64(idleGrid)-end%int64(idleGrid))%int64(idleGrid))
}
