package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Wake-ups between polls.
//
// An idle relay's reads back off to MaxPollInterval, so a message would
// wait up to that long. Four things end the wait sooner: a wake-up from a
// producer in this process (Backend.Local), a PostgreSQL notification
// from a Go producer in another one (listenLoop), and, for every
// producer (plain SQL, another language, an application whose table the
// relay adopted), one of these two, chosen per database:
//
//   - notify (PostgreSQL, schema version 18): the table's trigger
//     notifies the relay's LISTEN channel at each INSERT statement while
//     the relay has a row in outbox_wake_wanted. The relay adds its row
//     when nothing happened for wantAfter and removes it when it is
//     woken more than busyPerSecond times a second, so that under load no
//     producer's commit notifies (a NOTIFY serializes every notifying
//     commit). Idle, it costs nothing: the relay waits on its LISTEN
//     connection.
//   - watch (SQLite on Linux): the probe below runs when the database
//     file or its write-ahead log was written (inotify), and once a
//     second; idle, nothing runs.
//   - a change feed (driver.ChangeFeed; MySQL/MariaDB's binary log,
//     outboxbinlog): the probe runs when the feed says a transaction
//     that inserted into the table committed (at most every
//     ProbeInterval), and once a second; idle, the feed's connection
//     waits. Where it cannot follow the commits, or loses them, the
//     relay probes as below and tries the feed again later.
//   - probe (MySQL/MariaDB, SQLite elsewhere; PostgreSQL where LISTEN cannot work,
//     behind a pooler without --listen-db, or where an adopted table has
//     no trigger): every ProbeInterval the relay asks for the table's
//     highest id (one primary-key lookup) and reads when it moved. Each
//     probe costs the relay and the server far less than a full read,
//     but it is a statement every ProbeInterval: about 1 % of a core at
//     25 ms on this project's benchmark machine (BENCHMARKS.md).
//
// Either runs once per database, however many partitions and workers the
// relay has, and only while the relay holds partitions; their ticks fall
// on multiples of the interval of the wall clock, so that the loops of
// every database of a process run on one wake-up of the process.

const (
	// wantAfter: the relay asks for notifications after this long
	// without rounds that found messages and without wake-ups.
	wantAfter = 200 * time.Millisecond
	// busyPerSecond: more wake-ups and rounds with messages than this
	// in a second and the relay withdraws its row, so that producers'
	// commits stop notifying: messages arrive fast enough that its
	// shortest polls find them.
	busyPerSecond = 150
	// notifyTick is how often the loop looks at the relay's activity
	// while it has not asked for notifications, notifyIdleTick while it
	// has.
	notifyTick     = 100 * time.Millisecond
	notifyIdleTick = 500 * time.Millisecond
	// wantReread is when the relay reads again after asking for
	// notifications.
	wantReread = 100 * time.Millisecond
	// watchSafety is how often a relay that watches its SQLite file
	// probes without a change seen.
	watchSafety = time.Second
	// watchRecheck is the first wait before probing again after a change
	// of the file that did not move the table's highest id; it doubles
	// for watchRechecks probes (2 ms to 64 ms: 126 ms in all).
	watchRecheck  = 2 * time.Millisecond
	watchRechecks = 6
	// pruneEvery is how often an idle relay refreshes its row and
	// removes the rows of relays that died with theirs: those not
	// refreshed for wantStale (plus three lease TTLs) whose relay's
	// registration is as old.
	pruneEvery = 30 * time.Second
	wantStale  = 2 * time.Minute
)

// prober is a store that can probe for new rows: *store.Store and
// *adoptstore.Store.
type prober interface {
	// Probe returns a value that changes whenever a row was added.
	Probe(ctx context.Context) (int64, error)
	// RecordWake records the relay's wake-up for `outbox status` and
	// reports whether its registration was there to hold it.
	RecordWake(ctx context.Context, id, wake string) (bool, error)
	// WakeTrigger reports whether the table notifies idle relays;
	// WantWake asks for (or stops) those notifications for relay id;
	// PruneWake drops the requests of relays not seen for age.
	WakeTrigger(ctx context.Context) (bool, error)
	WantWake(ctx context.Context, id string, want bool) error
	PruneWake(ctx context.Context, age time.Duration) error
	// DatabaseFile is a SQLite database's file, "" elsewhere.
	DatabaseFile(ctx context.Context) (string, error)
	// FeedTable is the table a change feed follows.
	FeedTable() string
}

// probeState is what Wake reports, as the wake loop and listenLoop find
// it.
type probeState struct {
	mu sync.Mutex
	// probing: the probe runs and works.
	probing bool
	// trigger: the table notifies idle relays (see store.WakeTrigger).
	trigger bool
	// watching names what tells the relay of changes, so that the probe
	// runs on them rather than every ProbeInterval: "watch" (the SQLite
	// file), the change feed's name; "" while nothing does.
	watching string
	// noSignals: LISTEN cannot work over the relay's connection.
	noSignals bool
	// listenSince is when the current Listen call started (zero while
	// none runs), listenCalls how many wake-ups it gave since.
	listenSince time.Time
	listenCalls int
}

// listenChecked is how long a Listen call must have run before the relay
// trusts its connection with no signal received yet: Listen returns
// driver.ErrNoSignals within 5 s when its own check signal does not come
// back.
const listenChecked = 6 * time.Second

// Wake says how the relay learns of new messages between its polls:
// "notify" (PostgreSQL LISTEN: the table's trigger and the Go producers'
// signals), "notify (Go producers)" (LISTEN where the table has no
// trigger), "probe 25ms" (the change probe and its interval), the last two
// joined by " + ", or "poll" when it only polls (at most MaxPollInterval
// apart).
func (r *Relay) Wake() string {
	r.probe.mu.Lock()
	defer r.probe.mu.Unlock()
	var parts []string
	if r.backend != nil && r.backend.Listen != nil && !r.probe.noSignals {
		if r.probe.trigger && !r.probe.probing {
			return "notify"
		}
		parts = append(parts, "notify (Go producers)")
	}
	switch {
	case r.probe.probing && r.probe.watching != "":
		parts = append(parts, r.probe.watching)
	case r.probe.probing:
		parts = append(parts, fmt.Sprintf("probe %s", r.cfg.ProbeInterval))
	}
	if len(parts) == 0 {
		return "poll"
	}
	return strings.Join(parts, " + ")
}

// setNoSignals records whether LISTEN works over the relay's connection.
func (r *Relay) setNoSignals(v bool) {
	r.probe.mu.Lock()
	r.probe.noSignals = v
	r.probe.mu.Unlock()
}

// listening records that a Listen call starts (on) or ended.
func (r *Relay) listening(on bool) {
	r.probe.mu.Lock()
	r.probe.listenSince, r.probe.listenCalls = time.Time{}, 0
	if on {
		r.probe.listenSince = time.Now()
	}
	r.probe.mu.Unlock()
}

// listenWake is the wake-up of a Listen call.
func (r *Relay) listenWake() {
	r.probe.mu.Lock()
	r.probe.listenCalls++
	r.probe.mu.Unlock()
	r.wakeSelf()
}

// listenWorks reports whether notifications reach the relay: a Listen
// call runs, and gave a wake-up besides its first (its check signal came
// back, or a producer's) or has run past its check.
func (r *Relay) listenWorks() bool {
	r.probe.mu.Lock()
	defer r.probe.mu.Unlock()
	return !r.probe.noSignals && !r.probe.listenSince.IsZero() &&
		(r.probe.listenCalls >= 2 || time.Since(r.probe.listenSince) >= listenChecked)
}

func (r *Relay) setProbing(on bool) {
	r.probe.mu.Lock()
	r.probe.probing = on
	r.probe.mu.Unlock()
}

func (r *Relay) setWatching(name string) {
	r.probe.mu.Lock()
	r.probe.watching = name
	r.probe.mu.Unlock()
}

func (r *Relay) isWatching() bool {
	r.probe.mu.Lock()
	defer r.probe.mu.Unlock()
	return r.probe.watching != ""
}

func (r *Relay) setTrigger(on bool) {
	r.probe.mu.Lock()
	r.probe.trigger = on
	r.probe.mu.Unlock()
}

// startProbe starts the wake loop when the store has what it needs.
func (r *Relay) startProbe(ctx context.Context) {
	p, ok := r.store.(prober)
	if !ok {
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.wakeLoop(ctx, p)
	}()
}

// wakeLoop runs the wake-up chosen for the database (see the top of this
// file): it keeps the relay's row of outbox_wake_wanted while LISTEN
// works and the table has the trigger, and probes otherwise (unless
// ProbeInterval is negative). A failing probe is said once at warning
// level and tried again at doubling intervals up to MaxPollInterval: the
// relay polls meanwhile.
func (r *Relay) wakeLoop(ctx context.Context, p prober) {
	w := &waker{r: r, p: p, interval: r.cfg.ProbeInterval, wait: r.cfg.ProbeInterval}
	w.trigger = r.tableNotifies(ctx, p)
	if !w.trigger && w.interval <= 0 {
		r.log.Debug("outbox relay: no change probe; new messages are found by polling", "relay", r.id)
	}
	// SQLite: probe when the database's files change (another process
	// committed), not every ProbeInterval; elsewhere, when the change
	// feed says a transaction inserted into the table, at most every
	// ProbeInterval.
	changed := make(chan struct{}, 1)
	if w.interval > 0 && !r.watchDatabase(ctx, p, changed) && r.backend != nil && r.backend.Feed != nil {
		w.spacing = w.interval
		r.followFeed(ctx, p, changed)
	}
	defer func() {
		if w.wanted {
			w.want(ctx, false)
		}
	}()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
			// The write seen may be a transaction's before its commit
			// is visible (SQLite publishes it in shared memory, which
			// no watch sees; a binary log is written before the
			// storage engine commits): probe again shortly until it
			// moves.
			w.rechecks = watchRechecks
			if wait := w.spacing - time.Since(w.probed); wait > 0 {
				t.Reset(wait)
				continue
			}
		}
		var next time.Duration
		_, held := r.own.snapshot()
		switch {
		case !held:
			// Another relay serves the partitions: it is the one to wake.
			if w.wanted {
				w.want(ctx, false)
			}
			w.known = false
			r.setProbing(false)
			next = max(w.interval, idleGrid)
		case w.trigger && r.listenWorks():
			next = w.notify(ctx)
		case w.interval <= 0:
			// No probe: look again for LISTEN working.
			if w.wanted {
				w.want(ctx, false)
			}
			next = time.Second
		default:
			var ok bool
			if next, ok = w.probe(ctx); !ok {
				return
			}
		}
		if s := r.Wake(); held && s != w.recorded {
			w.recordWake(ctx, s)
		}
		t.Reset(onTick(next))
	}
}

// tableNotifies reports whether the table notifies idle relays, for a
// relay that listens (false for one that does not, or when it cannot
// tell), and records it for Wake.
func (r *Relay) tableNotifies(ctx context.Context, p prober) bool {
	if r.backend == nil || r.backend.Listen == nil {
		return false
	}
	tctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	trigger, err := p.WakeTrigger(tctx)
	cancel()
	if err != nil {
		r.log.Debug("outbox relay: cannot tell whether the table notifies idle relays; probing instead", "relay", r.id, "err", err)
	}
	r.setTrigger(trigger)
	return trigger
}

// watchDatabase watches a SQLite database's files until ctx ends,
// sending on changed (without blocking) whenever they are written, and
// reports whether it does; it does nothing for the other databases.
// While it watches, the wake loop probes on changes rather than every
// ProbeInterval.
func (r *Relay) watchDatabase(ctx context.Context, p prober, changed chan<- struct{}) bool {
	fctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	file, err := p.DatabaseFile(fctx)
	cancel()
	if err != nil || file == "" {
		return false
	}
	r.setWatching("watch")
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		err := watchFiles(ctx, file, func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
		r.setWatching("")
		if err != nil {
			r.log.Debug("outbox relay: cannot watch the database file; probing every probe_interval", "relay", r.id, "file", file, "err", err)
		}
	}()
	return true
}

// Following a change feed: after it stops, the relay tries again after
// feedRetry, doubling up to feedRetryMax while it keeps failing to start.
const (
	feedRetry    = time.Second
	feedRetryMax = time.Minute
)

// followFeed follows the backend's change feed until ctx ends, sending on
// changed (without blocking) whenever it reports a commit; while it
// follows, the wake loop probes on those rather than every ProbeInterval.
// A feed that cannot start is said once (per reason) at info level, one
// lost after it worked at warning level; the relay probes every
// ProbeInterval meanwhile.
func (r *Relay) followFeed(ctx context.Context, p prober, changed chan<- struct{}) {
	name := "feed"
	if s, ok := r.backend.Feed.(fmt.Stringer); ok {
		name = s.String()
	}
	table := p.FeedTable()
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		wait, said := feedRetry, ""
		for {
			var up atomic.Bool
			err := r.backend.Feed.Watch(ctx, table, func() {
				if !up.Swap(true) {
					r.setWatching(name)
				}
				select {
				case changed <- struct{}{}:
				default:
				}
			})
			r.setWatching("")
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				err = errors.New("it stopped")
			}
			switch {
			case up.Load():
				wait, said = feedRetry, ""
				r.log.Warn("outbox relay: lost the "+name+"; probing every probe_interval until it is back",
					"relay", r.id, "probe_interval", r.cfg.ProbeInterval, "err", err)
			case err.Error() != said:
				said = err.Error()
				r.log.Info("outbox relay: cannot follow the "+name+"; probing every probe_interval, trying again later",
					"relay", r.id, "probe_interval", r.cfg.ProbeInterval, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(wait*2, feedRetryMax)
		}
	}()
}

// waker is the wake loop's state from one tick to the next.
type waker struct {
	r *Relay
	p prober
	// interval is ProbeInterval; trigger: the table notifies idle
	// relays.
	interval time.Duration
	trigger  bool

	// The probe: the last value it gave (known: there is one), its
	// failures in a row, and the wait they make.
	last  int64
	known bool
	fails int
	wait  time.Duration
	// rechecks is how many quick probes are left after a change of the
	// SQLite file (or one the feed reported) that did not move the
	// table's highest id yet.
	rechecks int
	// spacing is the shortest time between the start of a probe and one
	// a change asks for (ProbeInterval with a change feed, whose changes
	// come as often as the producers commit); probed is when the last
	// one started.
	spacing time.Duration
	probed  time.Time

	// Notifications: wanted is whether the relay has its row of
	// outbox_wake_wanted, wantFailed whether asking failed (and was
	// said). lastAct and quietSince are the relay's activity count and
	// since when it stayed so; windowAct and windowFrom start the second
	// over which a wanting relay counts its activity.
	wanted, wantFailed     bool
	lastAct, windowAct     int64
	quietSince, windowFrom time.Time
	nextPrune              time.Time

	// The wake-up recorded for `outbox status`, the one being recorded,
	// the tries it took so far, and when to try again.
	recorded, recording string
	recordTries         int
	recordAt            time.Time
}

// want adds the relay's row of outbox_wake_wanted (v) or removes it; a
// failure is said once until asking works again. It runs after ctx ended
// too, to remove the row on the way out.
func (w *waker) want(ctx context.Context, v bool) {
	r := w.r
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.statementTimeout())
	err := w.p.WantWake(wctx, r.id, v)
	cancel()
	switch {
	case err == nil:
		w.wanted, w.wantFailed = v, false
	case !w.wantFailed:
		w.wantFailed = true
		r.log.Warn("outbox relay: asking for notifications failed; new messages are found by polling meanwhile", "relay", r.id, "err", err)
	}
}

// notify is a tick while LISTEN works and the table notifies: the relay
// asks for notifications once nothing happened for wantAfter, withdraws
// when busier than busyPerSecond, and refreshes its row (pruning those
// of dead relays) every pruneEvery. It returns the wait until the next
// tick.
func (w *waker) notify(ctx context.Context) time.Duration {
	r := w.r
	w.known = false
	r.setProbing(false)
	act, now := r.activity.Load(), time.Now()
	if !w.wanted {
		if act != w.lastAct || w.quietSince.IsZero() {
			w.lastAct, w.quietSince = act, now
			return notifyTick
		}
		if now.Sub(w.quietSince) < wantAfter {
			return notifyTick
		}
		if w.want(ctx, true); !w.wanted {
			return notifyTick
		}
		// An INSERT that ran before the row was there did not notify:
		// read once more now, and again a moment later for a
		// transaction that commits after it.
		r.wakeSelf()
		time.AfterFunc(wantReread, r.wakeSelf)
		w.windowAct, w.windowFrom = r.activity.Load(), now
		w.nextPrune = now.Add(pruneEvery)
		return notifyIdleTick
	}
	next := notifyIdleTick
	if el := now.Sub(w.windowFrom); el >= time.Second {
		if float64(act-w.windowAct)/el.Seconds() > busyPerSecond {
			if w.want(ctx, false); !w.wanted {
				w.lastAct, w.quietSince = act, now
				next = notifyTick
			}
		}
		w.windowAct, w.windowFrom = act, now
	}
	if now.After(w.nextPrune) {
		// Refresh the row (a relay's row goes stale after wantStale
		// without a refresh or a heartbeat), and drop those of relays
		// that died with theirs.
		w.nextPrune = now.Add(pruneEvery)
		w.want(ctx, true)
		pctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
		if err := w.p.PruneWake(pctx, wantStale+3*r.cfg.LeaseTTL); err != nil {
			r.log.Debug("outbox relay: pruning the notification requests of dead relays failed", "relay", r.id, "err", err)
		}
		cancel()
	}
	return next
}

// probe is a tick of the change probe: it wakes the relay when the
// table's highest id moved, says a failure once and backs off (doubling
// up to MaxPollInterval) until the probe works again. It returns the
// wait until the next tick, and false when ctx ended.
func (w *waker) probe(ctx context.Context) (time.Duration, bool) {
	r := w.r
	if w.wanted {
		w.want(ctx, false)
	}
	w.probed = time.Now()
	pctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	v, err := w.p.Probe(pctx)
	cancel()
	switch {
	case ctx.Err() != nil:
		return 0, false
	case err != nil:
		w.fails++
		w.known = false
		if w.fails == 1 {
			r.setProbing(false)
			r.log.Warn("outbox relay: the change probe failed; new messages are found by polling (at most max_poll_interval apart) until it works again",
				"relay", r.id, "max_poll_interval", r.cfg.MaxPollInterval, "err", err)
		}
		w.wait = min(max(w.wait*2, w.interval), r.cfg.MaxPollInterval)
	default:
		if w.fails > 0 {
			r.log.Info("outbox relay: the change probe works again", "relay", r.id)
		}
		r.setProbing(true)
		w.fails, w.wait = 0, w.interval
		if w.known && v != w.last {
			r.wakeSelf()
			w.rechecks = 0
		}
		w.last, w.known = v, true
	}
	next := w.wait
	if r.isWatching() && w.fails == 0 {
		// Changes come by the watch; this is the safety net.
		next = watchSafety
		if w.rechecks > 0 {
			next = watchRecheck << (watchRechecks - w.rechecks)
			w.rechecks--
		}
	}
	return next, true
}

// recordWake records the relay's wake-up s for `outbox status`. The
// first heartbeat makes the row that holds it: until then (or while
// recording fails), it tries again a second later, 30 times at most for
// one value.
func (w *waker) recordWake(ctx context.Context, s string) {
	if s != w.recording {
		w.recording, w.recordTries = s, 0
	}
	if w.recordTries >= 30 || !time.Now().After(w.recordAt) {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, w.r.statementTimeout())
	ok, err := w.p.RecordWake(rctx, w.r.id, s)
	cancel()
	if ok && err == nil {
		w.recorded = s
	} else {
		w.recordTries++
		w.recordAt = time.Now().Add(time.Second)
	}
}

// onTick is the wait until the next multiple of d of the wall clock.
func onTick(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d - time.Duration(time.Now().UnixNano()%int64(d))
}
