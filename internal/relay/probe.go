package relay

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Wake-ups between polls.
//
// An idle relay's reads back off to MaxPollInterval, so a message would
// wait up to that long. Three things end the wait sooner: a wake-up from
// a producer in this process (Backend.Local), a PostgreSQL notification
// from a Go producer in another one (listenLoop), and the change probe
// here, which sees a row from any producer: plain SQL, another language,
// an application whose table the relay adopted, on every database.
//
// Every ProbeInterval the probe asks the database for the table's highest
// id (one primary-key lookup, tens of microseconds of the server's time)
// and wakes the workers when it moved. A full read costs several times
// that, which is why the reads themselves back off instead. The probe
// runs while the relay holds partitions, once per database however many
// partitions and workers it has, and its ticks fall on multiples of the
// interval of the wall clock, so that the probes of every database of a
// process run on one wake-up of the process.

// prober is a store that can probe for new rows: *store.Store and
// *store.Adopted.
type prober interface {
	// Probe returns a value that changes whenever a row was added.
	Probe(ctx context.Context) (int64, error)
	// RecordWake records the relay's wake-up for `outbox status` and
	// reports whether its registration was there to hold it.
	RecordWake(ctx context.Context, id, wake string) (bool, error)
}

// probeState is the probe's side of what Wake reports.
type probeState struct {
	mu sync.Mutex
	// on: the probe works (false before its first answer and while it
	// fails); off: it is not run at all.
	on, off bool
	// noSignals: LISTEN cannot work over the relay's connection.
	noSignals bool
}

// Wake says how the relay learns of new messages between its polls:
// "notify" (PostgreSQL LISTEN for the Go producers' signals), "probe 10ms"
// (the change probe and its interval), both joined by " + ", or "poll"
// when it only polls (at most MaxPollInterval apart).
func (r *Relay) Wake() string {
	r.probe.mu.Lock()
	defer r.probe.mu.Unlock()
	var parts []string
	if r.backend != nil && r.backend.Listen != nil && !r.probe.noSignals {
		parts = append(parts, "notify")
	}
	if r.probe.on && !r.probe.off {
		parts = append(parts, fmt.Sprintf("probe %s", r.cfg.ProbeInterval))
	}
	if len(parts) == 0 {
		return "poll"
	}
	s := parts[0]
	for _, p := range parts[1:] {
		s += " + " + p
	}
	return s
}

// setNoSignals records whether LISTEN works over the relay's connection.
func (r *Relay) setNoSignals(v bool) {
	r.probe.mu.Lock()
	r.probe.noSignals = v
	r.probe.mu.Unlock()
}

// startProbe starts the change probe when the store has one and
// ProbeInterval is positive.
func (r *Relay) startProbe(ctx context.Context) {
	p, ok := r.store.(prober)
	if !ok || r.cfg.ProbeInterval <= 0 {
		r.probe.mu.Lock()
		r.probe.off = true
		r.probe.mu.Unlock()
		r.log.Debug("outbox relay: no change probe; new messages are found by polling", "relay", r.id)
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.probeLoop(ctx, p)
	}()
}

// probeLoop probes every ProbeInterval and wakes the workers when the
// value moved. A failing probe is said once at warning level and tried
// again at doubling intervals up to MaxPollInterval: the relay polls
// meanwhile.
func (r *Relay) probeLoop(ctx context.Context, p prober) {
	interval := r.cfg.ProbeInterval
	var last int64
	known := false
	fails := 0
	wait := interval
	recorded, recording := "", ""
	recordTries := 0
	var recordAt time.Time
	t := time.NewTimer(onTick(interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, ok := r.own.snapshot(); !ok {
			// Another relay serves the partitions: its probe wakes it.
			known = false
			t.Reset(onTick(max(interval, idleGrid)))
			continue
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
			if fails > 0 || !known {
				r.setProbing(true)
			}
			fails, wait = 0, interval
			if known && v != last {
				r.wakeSelf()
			}
			last, known = v, true
		}
		w := r.Wake()
		if w != recording {
			recording, recordTries = w, 0
		}
		if w != recorded && recordTries < 30 && time.Now().After(recordAt) {
			// The first heartbeat makes the row that holds it: until then
			// (or while recording fails), try again a second later.
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
		t.Reset(onTick(wait))
	}
}

func (r *Relay) setProbing(on bool) {
	r.probe.mu.Lock()
	r.probe.on = on
	r.probe.mu.Unlock()
}

// onTick is the wait until the next multiple of d of the wall clock.
func onTick(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d - time.Duration(time.Now().UnixNano()%int64(d))
}
