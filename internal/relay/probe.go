package relay

import (
	"context"
	"fmt"
	"strings"
	"sync"
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
// *store.Adopted.
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
}

// probeState is what Wake reports, as the wake loop and listenLoop find
// it.
type probeState struct {
	mu sync.Mutex
	// probing: the probe runs and works.
	probing bool
	// trigger: the table notifies idle relays (see store.WakeTrigger).
	trigger bool
	// watching: the probe runs when the SQLite file changes rather
	// than every ProbeInterval.
	watching bool
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
	case r.probe.probing && r.probe.watching:
		parts = append(parts, "watch")
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

func (r *Relay) setWatching(on bool) {
	r.probe.mu.Lock()
	r.probe.watching = on
	r.probe.mu.Unlock()
}

func (r *Relay) isWatching() bool {
	r.probe.mu.Lock()
	defer r.probe.mu.Unlock()
	return r.probe.watching
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
	interval := r.cfg.ProbeInterval
	trigger := false
	if r.backend != nil && r.backend.Listen != nil {
		tctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
		var err error
		trigger, err = p.WakeTrigger(tctx)
		cancel()
		if err != nil {
			r.log.Debug("outbox relay: cannot tell whether the table notifies idle relays; probing instead", "relay", r.id, "err", err)
		}
		r.setTrigger(trigger)
	}
	if !trigger && interval <= 0 {
		r.log.Debug("outbox relay: no change probe; new messages are found by polling", "relay", r.id)
	}
	// SQLite: probe when the database's files change (another process
	// committed), not every ProbeInterval.
	changed := make(chan struct{}, 1)
	if interval > 0 {
		fctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
		file, err := p.DatabaseFile(fctx)
		cancel()
		if err == nil && file != "" {
			r.setWatching(true)
			r.bg.Add(1)
			go func() {
				defer r.bg.Done()
				err := watchFiles(ctx, file, func() {
					select {
					case changed <- struct{}{}:
					default:
					}
				})
				r.setWatching(false)
				if err != nil {
					r.log.Debug("outbox relay: cannot watch the database file; probing every probe_interval", "relay", r.id, "file", file, "err", err)
				}
			}()
		}
	}

	var (
		last                   int64
		known                  bool
		fails                  int
		wait                   = interval
		wanted, wantFailed     bool
		lastAct, windowAct     int64
		quietSince, windowFrom time.Time
		nextPrune              time.Time
		recorded, recording    string
		recordTries            int
		recordAt               time.Time
		rechecks               int
	)
	want := func(v bool) {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.statementTimeout())
		err := p.WantWake(wctx, r.id, v)
		cancel()
		switch {
		case err == nil:
			wanted, wantFailed = v, false
		case !wantFailed:
			wantFailed = true
			r.log.Warn("outbox relay: asking for notifications failed; new messages are found by polling meanwhile", "relay", r.id, "err", err)
		}
	}
	defer func() {
		if wanted {
			want(false)
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
			// no watch sees): probe again shortly until it moves.
			rechecks = watchRechecks
		}
		next := interval
		_, held := r.own.snapshot()
		switch {
		case !held:
			// Another relay serves the partitions: it is the one to wake.
			if wanted {
				want(false)
			}
			known = false
			r.setProbing(false)
			next = max(interval, idleGrid)
		case trigger && r.listenWorks():
			known = false
			r.setProbing(false)
			act, now := r.activity.Load(), time.Now()
			if !wanted {
				next = notifyTick
				if act != lastAct || quietSince.IsZero() {
					lastAct, quietSince = act, now
					break
				}
				if now.Sub(quietSince) < wantAfter {
					break
				}
				if want(true); wanted {
					// An INSERT that ran before the row was there did not
					// notify: read once more now, and again a moment
					// later for a transaction that commits after it.
					r.wakeSelf()
					time.AfterFunc(wantReread, r.wakeSelf)
					windowAct, windowFrom = r.activity.Load(), now
					nextPrune = now.Add(pruneEvery)
					next = notifyIdleTick
				}
				break
			}
			next = notifyIdleTick
			if el := now.Sub(windowFrom); el >= time.Second {
				if float64(act-windowAct)/el.Seconds() > busyPerSecond {
					if want(false); !wanted {
						lastAct, quietSince = act, now
						next = notifyTick
					}
				}
				windowAct, windowFrom = act, now
			}
			if now.After(nextPrune) {
				// Refresh the row (a relay's row goes stale after
				// wantStale without a refresh or a heartbeat), and drop
				// those of relays that died with theirs.
				nextPrune = now.Add(pruneEvery)
				want(true)
				pctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
				if err := p.PruneWake(pctx, wantStale+3*r.cfg.LeaseTTL); err != nil {
					r.log.Debug("outbox relay: pruning the notification requests of dead relays failed", "relay", r.id, "err", err)
				}
				cancel()
			}
		case interval <= 0:
			// No probe: look again for LISTEN working.
			if wanted {
				want(false)
			}
			next = time.Second
		default:
			if wanted {
				want(false)
			}
			pctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
			v, err := p.Probe(pctx)
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				fails++
				known = false
				if fails == 1 {
					r.setProbing(false)
					r.log.Warn("outbox relay: the change probe failed; new messages are found by polling (at most max_poll_interval apart) until it works again",
						"relay", r.id, "max_poll_interval", r.cfg.MaxPollInterval, "err", err)
				}
				wait = min(max(wait*2, interval), r.cfg.MaxPollInterval)
			default:
				if fails > 0 {
					r.log.Info("outbox relay: the change probe works again", "relay", r.id)
				}
				r.setProbing(true)
				fails, wait = 0, interval
				if known && v != last {
					r.wakeSelf()
					rechecks = 0
				}
				last, known = v, true
			}
			next = wait
			if r.isWatching() && fails == 0 {
				// Changes come by the watch; this is the safety net.
				next = watchSafety
				if rechecks > 0 {
					next = watchRecheck << (watchRechecks - rechecks)
					rechecks--
				}
			}
		}
		if w := r.Wake(); held && w != recorded {
			if w != recording {
				recording, recordTries = w, 0
			}
			if recordTries < 30 && time.Now().After(recordAt) {
				// The first heartbeat makes the row that holds it: until
				// then (or while recording fails), try again a second
				// later.
				rctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
				ok, err := p.RecordWake(rctx, r.id, w)
				cancel()
				if ok && err == nil {
					recorded = w
				} else {
					recordTries++
					recordAt = time.Now().Add(time.Second)
				}
			}
		}
		t.Reset(onTick(next))
	}
}

// onTick is the wait until the next multiple of d of the wall clock.
func onTick(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d - time.Duration(time.Now().UnixNano()%int64(d))
}
