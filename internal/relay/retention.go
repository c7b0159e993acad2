package relay

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// Retention defaults; outbox.DefaultRetentionSent and the others are
// these, documented there.
const (
	DefaultRetentionSent      = 24 * time.Hour
	DefaultRetentionDead      = 14 * 24 * time.Hour
	DefaultRetentionBatchSize = 1000
	DefaultRetentionInterval  = time.Minute
)

// Retention is a relay's retention configuration (see
// outbox.RetentionConfig); a nil Config.Retention turns retention off.
type Retention struct {
	Policy    store.RetentionPolicy
	BatchSize int
	Interval  time.Duration
	OnSweep   func(RetentionReport) // nil: none
	// Disabled turns retention off: Config.SetDefaults leaves a nil
	// Config.Retention then.
	Disabled bool
}

// check names a bad field, in the words of outbox.RetentionConfig.
func (c *Retention) check() error {
	if c == nil {
		return nil
	}
	switch {
	case c.Policy.Sent < 0:
		return errors.New("outbox: RetentionConfig.Sent must not be negative")
	case c.Policy.Dead < 0:
		return errors.New("outbox: RetentionConfig.Dead must not be negative")
	case c.BatchSize < 0 || c.BatchSize > 100_000:
		return errors.New("outbox: RetentionConfig.BatchSize must be between 0 and 100000")
	case c.Interval < 0:
		return errors.New("outbox: RetentionConfig.Interval must not be negative")
	}
	return nil
}

// withDefaults is a copy of c with its defaults filled in; nil when
// retention is off.
func (c *Retention) withDefaults() *Retention {
	if c == nil || c.Disabled {
		return nil
	}
	rt := *c
	orDefault(&rt.Policy.Sent, DefaultRetentionSent)
	orDefault(&rt.Policy.Dead, DefaultRetentionDead)
	orDefault(&rt.BatchSize, DefaultRetentionBatchSize)
	orDefault(&rt.Interval, DefaultRetentionInterval)
	return &rt
}

// RetentionReport describes one retention sweep; outbox.RetentionReport
// has the same fields.
type RetentionReport struct {
	Relay             string
	Removed           int64
	Archived          bool
	Batches           int
	Full              bool
	PartitionsDropped int
	PartitionsCreated int
	Err               error
}

// retention is a Retention with the rescan period worked out.
type retention struct {
	policy    store.RetentionPolicy
	batchSize int
	interval  time.Duration
	// rescan is how often a sweep starts over from the lowest id, to
	// reach rows it passed over because they were not due yet.
	rescan  time.Duration
	onSweep func(RetentionReport)
}

// markReset is how often the low-water mark is forgotten. Each full
// sweep also looks at the lowest row and starts from it when it lies at
// or below the mark (a row committed with a lower id than rows already
// removed, its transaction open across the retention; rows `outbox replay
// --archive` put back); forgetting the mark is the safety net.
const markReset = 6 * time.Hour

func resolve(c *Retention) retention {
	rt := retention{policy: c.Policy, batchSize: c.BatchSize, interval: c.Interval, onSweep: c.OnSweep}
	rt.rescan = min(max(min(rt.policy.Sent, rt.policy.Dead)/10, rt.interval), time.Hour)
	return rt
}

// sweeper is the retention state of the relay that runs it. Nothing in it
// must survive the relay: a new janitor starts from the lowest id.
type sweeper struct {
	// layout is what outbox_messages is, read from the catalog.
	layout tableLayout
	// look is, per day partition that was not droppable yet, when to look
	// at it again.
	look map[string]time.Time
	// mark: every id up to mark is gone from the table (on a partitioned
	// table: from its default partition).
	mark int64
	// tail is where the last sweep stopped: at the first row too young to
	// be due.
	tail      int64
	lastFull  time.Time
	markSince time.Time
}

// startRetention runs retention in the background until ctx ends, unless
// it is disabled.
func (r *Relay) startRetention(ctx context.Context) {
	if r.cfg.Retention == nil {
		return
	}
	rt := resolve(r.cfg.Retention)
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.retentionLoop(ctx, rt)
	}()
}

// janitor reports whether this relay runs retention now: it holds
// partition 0 and its leases are valid.
func (r *Relay) janitor() bool {
	parts, ok := r.own.snapshot()
	return ok && slices.Contains(parts, 0)
}

func (r *Relay) retentionLoop(ctx context.Context, rt retention) {
	t := time.NewTicker(rt.interval)
	defer t.Stop()
	var s sweeper
	var bs blobSweeper
	running, failing := false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !r.janitor() {
			if running {
				r.log.Info("outbox relay: retention moves to the relay holding partition 0", "relay", r.id)
			}
			running, s = false, sweeper{}
			continue
		}
		if !running {
			running = true
			r.log.Info("outbox relay: running retention", "relay", r.id, "sent", rt.policy.Sent, "dead", rt.policy.Dead, "archive", rt.policy.Archive)
		}
		rep := r.sweep(ctx, rt, &s)
		switch {
		case rep.Err != nil && ctx.Err() == nil && !failing:
			failing = true
			hint := ""
			if rt.policy.Archive {
				hint = " (archiving needs outbox_messages_archive: run `outbox migrate`)"
			}
			r.log.Error("outbox relay: retention failed; trying again next interval"+hint, "relay", r.id, "err", rep.Err)
		case rep.Err == nil && failing:
			failing = false
			r.log.Info("outbox relay: retention recovered", "relay", r.id)
		}
		if rep.Removed > 0 {
			r.log.Debug("outbox relay: retention sweep", "relay", r.id, "removed", rep.Removed, "archived", rep.Archived, "batches", rep.Batches, "full", rep.Full)
		}
		if ctx.Err() == nil && r.janitor() {
			r.maybeSweepBlobs(ctx, rt, &bs)
		}
		if rt.onSweep != nil && ctx.Err() == nil {
			rt.onSweep(rep)
		}
	}
}

// sweep removes expired rows batch by batch up to the first row too young
// to be due, stopping early when ctx ends or the relay loses partition 0.
// Between batches it rests as long as the batch took, so retention uses at
// most half of one connection's time.
func (r *Relay) sweep(ctx context.Context, rt retention, s *sweeper) RetentionReport {
	rep := RetentionReport{Relay: r.id, Archived: rt.policy.Archive}
	now := time.Now()
	if s.markSince.IsZero() || now.Sub(s.markSince) > markReset {
		*s = sweeper{markSince: now}
	}
	cursor := max(s.tail, s.mark)
	full := now.Sub(s.lastFull) >= rt.rescan
	if full {
		rep.Full, s.lastFull, cursor = true, now, s.mark
	}
	if s.layout == layoutUnknown {
		on, err := r.store.Partitioned(ctx)
		if err != nil {
			rep.Err = err
			return rep
		}
		s.layout = layoutPlain
		if on {
			s.layout, s.look = layoutPartitioned, map[string]time.Time{}
		}
	}
	table := ""
	if s.layout == layoutPartitioned {
		if err := r.sweepPartitions(ctx, rt, s, &rep, now); err != nil {
			rep.Err = err
		}
		table = store.DefaultPartition
	}
	if full && s.mark > 0 {
		below, err := r.belowMark(ctx, table, s.mark, rt, &rep)
		if err != nil {
			rep.Err = errors.Join(rep.Err, err)
			return rep
		}
		if below {
			s.mark, cursor = 0, 0
		}
	}
	// The mark follows the cursor only while every row behind it is gone.
	advanceMark := cursor == s.mark
	for ctx.Err() == nil && r.janitor() {
		start := time.Now()
		b, err := r.retain(ctx, table, cursor, rt)
		if err != nil {
			rep.Err = errors.Join(rep.Err, err)
			return rep
		}
		rep.Batches++
		rep.Removed += b.Removed
		if advanceMark {
			switch {
			case b.FirstKept != 0:
				s.mark, advanceMark = b.FirstKept-1, false
			case b.LastID != 0:
				s.mark = b.LastID
			}
		}
		if b.FirstYoung != 0 || b.Scanned < rt.batchSize {
			s.tail = max(cursor, b.LastID)
			if b.FirstYoung != 0 {
				s.tail = b.FirstYoung - 1
			}
			return rep
		}
		cursor = b.LastID
		rest := time.NewTimer(min(time.Since(start), time.Second))
		select {
		case <-ctx.Done():
		case <-rest.C:
		}
		rest.Stop()
	}
	return rep
}

// belowMark reports whether table holds a row at or below mark, which
// the mark says is gone: a transaction that committed late with a low id,
// or rows `outbox replay --archive` put back with their ids. It looks at
// the lowest row alone (and removes it if it is due, as any sweep would).
func (r *Relay) belowMark(ctx context.Context, table string, mark int64, rt retention, rep *RetentionReport) (bool, error) {
	one := rt
	one.batchSize = 1
	b, err := r.retain(ctx, table, 0, one)
	if err != nil {
		return false, err
	}
	rep.Batches++
	rep.Removed += b.Removed
	return b.Scanned > 0 && b.LastID <= mark, nil
}

// tableLayout is how outbox_messages is laid out.
type tableLayout int

const (
	layoutUnknown tableLayout = iota
	layoutPlain
	layoutPartitioned
)

// partitionsAhead is how many days ahead of today (UTC) the janitor keeps
// day partitions of a partitioned table: enough for inserts to keep
// landing in day partitions through a few days without any relay.
const partitionsAhead = 3

// retain runs one retention batch over outbox_messages, or over one of
// its partitions when table is set.
func (r *Relay) retain(ctx context.Context, table string, after int64, rt retention) (store.RetentionBatch, error) {
	if table == "" {
		return r.store.Retain(ctx, after, rt.batchSize, rt.policy)
	}
	return r.store.RetainIn(ctx, table, after, rt.batchSize, rt.policy)
}

// sweepPartitions is retention's part on a partitioned table: it keeps
// day partitions ahead of today, drops (or with Archive keeps aside) each
// past day whose rows are all due, and in a past day held back by pending
// rows deletes the due rows one batch at a time. Rows of the default
// partition are left to the row sweep. A day is looked at once its end is
// older than the shorter retention; a day not droppable yet is looked at
// again when its last row is due, or at the next full sweep while it
// holds pending rows.
func (r *Relay) sweepPartitions(ctx context.Context, rt retention, s *sweeper, rep *RetentionReport, now time.Time) error {
	var errs []error
	made, err := r.store.AddPartitions(ctx, 0, partitionsAhead)
	rep.PartitionsCreated = made
	if err != nil {
		errs = append(errs, err)
	}
	days, err := r.store.DayPartitions(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	horizon := min(rt.policy.Sent, rt.policy.Dead)
	for _, p := range days {
		if ctx.Err() != nil || !r.janitor() {
			break
		}
		if now.Before(p.End().Add(horizon)) {
			break // days are in order: no later one can be due either
		}
		if next, ok := s.look[p.Name]; ok && now.Before(next) {
			continue
		}
		state, err := r.store.PartitionState(ctx, p.Name, rt.policy)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case state.Pending > 0:
			s.look[p.Name] = now.Add(rt.rescan)
			removed, batches, err := r.retainDay(ctx, p.Name, rt)
			rep.Removed += removed
			rep.Batches += batches
			if err != nil {
				errs = append(errs, err)
			}
		case state.DueIn > 0:
			s.look[p.Name] = now.Add(state.DueIn)
		default:
			dropped, err := r.store.DropPartition(ctx, p, rt.policy.Archive)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rep.Batches++
			if !dropped {
				// A pending row appeared since the state was read.
				s.look[p.Name] = now.Add(rt.rescan)
				continue
			}
			delete(s.look, p.Name)
			rep.PartitionsDropped++
			rep.Removed += state.Rows
			r.log.Debug("outbox relay: retention dropped a day partition", "relay", r.id, "partition", p.Name, "rows", state.Rows, "archive", rt.policy.Archive)
		}
	}
	return errors.Join(errs...)
}

// retainDay removes the due rows of a day partition held back by pending
// rows, batch by batch, resting between batches as the row sweep does.
func (r *Relay) retainDay(ctx context.Context, table string, rt retention) (removed int64, batches int, err error) {
	var cursor int64
	for ctx.Err() == nil && r.janitor() {
		start := time.Now()
		b, err := r.store.RetainIn(ctx, table, cursor, rt.batchSize, rt.policy)
		if err != nil {
			return removed, batches, err
		}
		batches++
		removed += b.Removed
		if b.Scanned < rt.batchSize {
			break
		}
		cursor = b.LastID
		rest := time.NewTimer(min(time.Since(start), time.Second))
		select {
		case <-ctx.Done():
		case <-rest.C:
		}
		rest.Stop()
	}
	return removed, batches, nil
}
