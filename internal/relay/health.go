package relay

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/publisher"
)

// Route health.
//
// A route is up or down. While it is up every message is published and
// every failure is the message's: it is charged an attempt (permanent
// classes go dead at once, the others after max_attempts). The route goes
// down when its destination, not the messages, is failing:
//
//   - a publish fails with publisher.ClassUnavailable (refused or reset connection,
//     broker blocked, not connected) and nothing in the same call went
//     through; or
//   - messages that had never failed before (attempts 0) keep failing,
//     whatever the class, with no success on the route in between, each
//     within downWindow of the one before: downCount of them, or
//     downAfter of them over downSpan or more. Failures of messages that
//     already failed before do not count: a message failing again while
//     new ones succeed is the message's problem, and so are a few poison
//     messages retried on an otherwise idle route. The count keeps a
//     destination failing half the time at random up (twenty failures in
//     a row is a one-in-a-million run); the span catches an outage on a
//     route that carries a message now and then.
//
// A message that fails as unavailable is never charged: when the route
// stays up (others of the call or the batch went through: a connection
// of a pool still coming back, a partition without a leader, a queue of
// its own missing) it alone is put back, for ProbeMin, doubled each
// further time it fails so, at most ProbeMax.
//
// A call whose messages all failed after others of the route went
// through in an earlier wave of the same batch (later messages of a key
// go in later waves) counts as one with a success.
//
// The publish call that takes a route down is not charged, nor is any
// failure of a call made while the route was down, nor a call of new
// messages that all failed while the evidence is still short of taking
// the route down: downAfter or more new messages failed since the last
// success (in this call or in others), or other calls of the route are
// still in flight and none succeeded since this one started (the
// relay's workers publish side by side: the first of them to hear
// back from a destination that just went away must not be the one to
// pay for it). Such messages are put back new, for a probe interval, and
// count again when they fail again; a message is spared for calls in
// flight once, so that a poison message on a busy route is charged the
// next time. While it is down the
// route gets one message at a time, the probe, after an interval that
// starts at ProbeMin and doubles up to ProbeMax; every other message of
// the route is put back, uncharged, until the next probe is due. A probe
// that succeeds (or any success of a call still in flight) brings the
// route up again; it then ramps up from one message in flight, doubling
// after each call that fully succeeds (slow start), to MaxInFlight or
// without limit.
//
// A failure that asks for a wait (HTTP 429 or 503 with Retry-After, a
// broker's throttling with a delay) holds the whole route for that long,
// at most MaxRetryAfter, without taking it down, and charges nothing.
// When the hold ends the route gets one message, a probe, and nothing
// else until it is answered: another wait holds the route again, any
// other answer ends the hold and the route ramps up from one message in
// flight (slow start). A destination asking every request to wait N
// seconds thus gets about one request per N seconds from a relay,
// however many messages or keys are pending.
const (
	downCount  = 20
	downAfter  = 3
	downSpan   = 2 * time.Second
	downWindow = 10 * time.Second
	// slowStartOpen is the window past which slow start ends on a route
	// without MaxInFlight.
	slowStartOpen = 256
)

// Probe interval defaults (outbox.DefaultProbeMin, DefaultProbeMax).
const (
	DefaultProbeMin = time.Second
	DefaultProbeMax = 30 * time.Second
)

// DefaultMaxRetryAfter bounds the wait a failure may ask for
// (outbox.DefaultMaxRetryAfter).
const DefaultMaxRetryAfter = time.Hour

// minHoldProbeWait is the shortest a message is put back while the first
// message after a hold is out.
const minHoldProbeWait = 10 * time.Millisecond

// health is a route's health and its limits, shared by the relay's
// workers.
type health struct {
	probeMin, probeMax time.Duration
	maxRetryAfter      time.Duration // bound on a hold
	maxInFlight        int           // 0: no limit
	limiter            *rate.Limiter // nil: no rate limit

	mu         sync.Mutex
	down       bool
	since      time.Time // when the route went down, or came up
	reason     string    // why it went down, one redacted line
	probes     int       // probes sent since it went down
	nextProbe  time.Time
	probing    bool               // a probe is in flight
	holdUntil  time.Time          // a Retry-After holds the route
	held       bool               // a hold was asked for and no probe since answered without one
	holdLen    time.Duration      // the last hold's length
	fresh      int                // failed new messages since the last success
	freshAt    time.Time          // when the last of them failed
	freshFirst time.Time          // when the first of them failed
	okAt       time.Time          // when a call of the route last had a success
	spared     map[int64]struct{} // rows once put back for calls in flight
	unreached  map[int64]int      // rows put back unavailable while the route was up: how often
	window     int                // slow start: most messages in flight; 0 none
	inflight   int
	freed      chan struct{} // closed when a slot frees up

	gauge prometheus.Gauge // outbox_circuit_open of the route; nil without metrics
}

func newHealth(rt Route) *health {
	h := &health{probeMin: rt.ProbeMin, probeMax: rt.ProbeMax, maxInFlight: rt.MaxInFlight, freed: make(chan struct{})}
	if h.probeMin <= 0 {
		h.probeMin = DefaultProbeMin
	}
	if h.probeMax <= 0 {
		h.probeMax = max(DefaultProbeMax, h.probeMin)
	}
	h.probeMax = max(h.probeMax, h.probeMin)
	h.maxRetryAfter = rt.MaxRetryAfter
	if h.maxRetryAfter <= 0 {
		h.maxRetryAfter = DefaultMaxRetryAfter
	}
	if rt.Rate > 0 {
		h.limiter = rate.NewLimiter(rate.Limit(rt.Rate), rateBurst(rt.Rate))
	}
	return h
}

// rateBurst is the bucket size of a rate: a tenth of a second's worth, so
// the rate holds over any span longer than that.
func rateBurst(perSecond float64) int {
	return max(1, int(perSecond/10))
}

// admission is what a route lets a publish do now.
type admission int

const (
	admitSend  admission = iota // publish
	admitProbe                  // publish one message, the probe
	admitWait                   // publish nothing; retry after the wait
)

// admit says what may be published on the route at now; for admitWait,
// how long until something may.
func (h *health) admit(now time.Time) (admission, time.Duration, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case now.Before(h.holdUntil):
		return admitWait, h.holdUntil.Sub(now), "the destination asked to wait: " + h.reason
	case h.held && !h.down && h.probing:
		// Back after the last hold's length (a client's short
		// backpressure), at most a probe interval.
		return admitWait, min(h.probeMin, max(h.holdLen, minHoldProbeWait)), "the destination asked to wait, probing"
	case h.held && !h.down:
		// The hold is over: one message first (counted with the probes,
		// which an outage starts afresh).
	case !h.down:
		return admitSend, 0, ""
	case h.probing:
		return admitWait, h.probeMin, "route down, probing: " + h.reason
	case now.Before(h.nextProbe):
		return admitWait, h.nextProbe.Sub(now), "route down: " + h.reason
	}
	h.probing = true
	h.probes++
	return admitProbe, 0, ""
}

// unprobe gives back a probe that was admitted but not sent.
func (h *health) unprobe(probe bool) {
	if !probe {
		return
	}
	h.mu.Lock()
	h.probing = false
	h.probes--
	h.mu.Unlock()
}

// holdWait bounds a wait a failure asked for by the route's
// MaxRetryAfter.
func (h *health) holdWait(d time.Duration) time.Duration { return min(d, h.maxRetryAfter) }

// paused is how long the route publishes nothing (0: it may publish, or
// a probe is due).
func (h *health) paused(now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	wait := h.holdUntil.Sub(now)
	if h.down && !h.probing {
		wait = max(wait, h.nextProbe.Sub(now))
	}
	return max(wait, 0)
}

// result is the outcome of one message of a publish call, as the health
// rule sees it.
type result struct {
	err   error
	fresh bool  // the message had never failed before
	id    int64 // the message's row
}

// callInfo is what the health rule knows of a publish call besides its
// results.
type callInfo struct {
	start    time.Time // when the call was made
	slots    int       // in-flight slots the call holds
	probe    bool      // the call was the probe
	okBefore bool      // a message of the route was confirmed earlier in the same batch
}

// maxSpared bounds health.spared and health.unreached; past it a set starts over.
const maxSpared = 4096

// transition is a change of a route's state that a call caused.
type transition struct {
	down, up bool
	reason   string
	downFor  time.Duration // up: how long the route was down
	probes   int           // up: probes sent while it was down
}

// observe records the results of one publish call and returns whether
// its failures are the messages' to be charged, the wait for failures not
// charged, and the state change.
func (h *health) observe(now time.Time, results []result, c callInfo) (charge bool, wait time.Duration, tr transition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.probe {
		h.probing = false
	}
	t := h.tally(results)
	if t.ok > 0 {
		tr = h.succeeded(now, t.ok == len(results))
	}
	if t.retryAfter > 0 {
		h.holdUntil = maxTime(h.holdUntil, now.Add(t.retryAfter))
		h.held, h.holdLen = true, t.retryAfter
	} else if c.probe && h.held && len(results) > 0 {
		// The first message after the hold was answered without another
		// wait: the hold is over, and the route ramps up from one message.
		h.held = false
		h.window = 1
	}
	if t.first == nil {
		return true, t.retryAfter, tr
	}
	if h.down {
		if c.probe {
			h.nextProbe = now.Add(h.interval())
		}
		return false, max(h.nextProbe.Sub(now), h.probeMin), tr
	}
	if t.ok > 0 || c.okBefore {
		return true, 0, tr
	}
	if t.fresh > 0 {
		h.freshFailed(now, t.fresh)
	}
	cause := t.unavailable
	if cause == nil && (h.fresh >= downCount || (h.fresh >= downAfter && now.Sub(h.freshFirst) >= downSpan)) {
		cause = t.first
	}
	if cause == nil && t.fresh > 0 && h.fresh >= downAfter {
		// New messages keep failing, in this call or in others since the
		// last success: likely the destination, not yet proven. Nobody is
		// charged; the messages come back new after a probe interval and
		// add to the evidence.
		return false, h.probeMin, tr
	}
	if cause == nil && t.fresh > 0 && h.inflight > c.slots && h.okAt.Before(c.start) && h.spare(results) {
		// Other calls are out and nothing has gone through since this one
		// left: they will tell whether the destination is there.
		return false, h.probeMin, tr
	}
	if cause == nil {
		return true, 0, tr
	}
	return false, h.probeMin, h.goDown(now, cause)
}

// callTally sums up the results of a publish call.
type callTally struct {
	ok    int // messages published
	fresh int // failed messages that had never failed before
	// first is the first failure that is not a hold, unavailable the
	// first of class unavailable.
	first, unavailable error
	// retryAfter is the longest hold a failure asked for, bounded by
	// maxRetryAfter.
	retryAfter time.Duration
}

// tally sums up results (h.mu held). A failure that asks to hold the
// route (Retry-After) counts only as that hold.
func (h *health) tally(results []result) callTally {
	var t callTally
	for _, res := range results {
		if res.err == nil {
			t.ok++
			continue
		}
		cls, after := classOf(res.err)
		if after > 0 {
			t.retryAfter = max(t.retryAfter, min(after, h.maxRetryAfter))
			continue
		}
		if t.first == nil {
			t.first = res.err
		}
		if cls == publisher.ClassUnavailable && t.unavailable == nil {
			t.unavailable = res.err
		}
		if res.fresh {
			t.fresh++
		}
	}
	return t
}

// succeeded records that a call published messages (all of them, or
// some) at now (h.mu held): the fresh failures are forgotten, a slow
// start widens after a call that published all, and a route that was
// down is up, which it returns as the transition.
func (h *health) succeeded(now time.Time, all bool) transition {
	h.fresh, h.freshFirst = 0, time.Time{}
	h.okAt = now
	if h.window > 0 && all {
		h.window *= 2
		if limit := h.maxInFlight; (limit > 0 && h.window >= limit) || (limit == 0 && h.window >= slowStartOpen) {
			h.window = 0
		}
	}
	if !h.down {
		return transition{}
	}
	tr := transition{up: true, downFor: now.Sub(h.since), probes: h.probes}
	h.down, h.since, h.probes, h.reason = false, now, 0, ""
	h.window = 1
	if h.gauge != nil {
		h.gauge.Add(-1)
	}
	return tr
}

// freshFailed adds n new messages that failed at now to the evidence
// that the destination is down (h.mu held); the count starts over when
// the last such failure is more than downWindow old.
func (h *health) freshFailed(now time.Time, n int) {
	if now.Sub(h.freshAt) > downWindow {
		h.fresh, h.freshFirst = 0, time.Time{}
	}
	if h.freshFirst.IsZero() {
		h.freshFirst = now
	}
	h.fresh += n
	h.freshAt = now
}

// goDown takes the route down at now for cause (h.mu held): it publishes
// nothing but a probe every probe interval until one goes through.
func (h *health) goDown(now time.Time, cause error) transition {
	h.down, h.since, h.probes, h.probing = true, now, 0, false
	h.reason = redact.Text(oneLine(cause.Error()))
	h.nextProbe = now.Add(h.probeMin)
	h.fresh, h.freshFirst = 0, time.Time{}
	if h.gauge != nil {
		h.gauge.Add(1)
	}
	return transition{down: true, reason: h.reason}
}

// spare records the new messages of a call put back for calls in flight
// (h.mu held) and reports whether none of them had been put back so
// before.
func (h *health) spare(results []result) bool {
	for _, res := range results {
		if _, ok := h.spared[res.id]; ok && res.err != nil && res.fresh {
			return false
		}
	}
	if h.spared == nil || len(h.spared) >= maxSpared {
		h.spared = map[int64]struct{}{}
	}
	for _, res := range results {
		if res.err != nil && res.fresh {
			h.spared[res.id] = struct{}{}
		}
	}
	return true
}

// unavailableWait records that row id failed as unavailable while the
// route stayed up and returns how long it waits, uncharged: ProbeMin,
// doubled each further time it fails so, at most ProbeMax.
func (h *health) unavailableWait(id int64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unreached == nil || len(h.unreached) >= maxSpared {
		h.unreached = map[int64]int{}
	}
	n := h.unreached[id]
	h.unreached[id] = n + 1
	d := h.probeMin
	for i := 0; i < n && d < h.probeMax; i++ {
		d *= 2
	}
	return min(d, h.probeMax)
}

// interval is the wait before the next probe after a failed one (h.mu
// held): ProbeMin doubled per probe sent, at most ProbeMax.
func (h *health) interval() time.Duration {
	d := h.probeMin
	for i := 1; i < h.probes && d < h.probeMax; i++ {
		d *= 2
	}
	return min(d, h.probeMax)
}

// state reports whether the route is down, since when and why.
func (h *health) state() (down bool, since time.Time, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down, h.since, h.reason
}

// acquire takes up to n of the route's in-flight slots, at least one,
// waiting while none is free, and returns how many it took (0 when ctx
// ended first).
func (h *health) acquire(ctx context.Context, n int) int {
	for {
		h.mu.Lock()
		limit := h.window
		if h.maxInFlight > 0 && (limit == 0 || h.maxInFlight < limit) {
			limit = h.maxInFlight
		}
		if limit == 0 {
			h.inflight += n
			h.mu.Unlock()
			return n
		}
		if free := limit - h.inflight; free > 0 {
			k := min(n, free)
			h.inflight += k
			h.mu.Unlock()
			return k
		}
		freed := h.freed
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0
		case <-freed:
		}
	}
}

// release gives back n slots.
func (h *health) release(n int) {
	h.mu.Lock()
	h.inflight -= n
	close(h.freed)
	h.freed = make(chan struct{})
	h.mu.Unlock()
}

// errRateWait: the rate limit would hold a call past the publish
// deadline; its messages are left for the next round.
var errRateWait = errors.New("rate limit: not before the publish deadline")

// paceN waits until the route's rate allows n messages. n must not be
// more than burst().
func (h *health) paceN(ctx context.Context, n int) error {
	if h.limiter == nil {
		return nil
	}
	res := h.limiter.ReserveN(time.Now(), n)
	delay := res.Delay()
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay+time.Second {
		res.Cancel()
		return errRateWait
	}
	if delay == 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		res.Cancel()
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// burst is the most messages one call may carry under the rate limit (0:
// no limit).
func (h *health) burst() int {
	if h.limiter == nil {
		return 0
	}
	return h.limiter.Burst()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// allPaused reports whether every route publishes nothing now: reading
// would only put the batch back.
func (rt *router) allPaused() bool {
	now := time.Now()
	for _, rs := range rt.routes {
		if rs.health.paused(now) <= 0 {
			return false
		}
	}
	return len(rt.routes) > 0
}

// transition reports a change of a route's state: one log line, the
// alerter, and the row `outbox status` reads.
func (r *Relay) transition(rs *routeState, tr transition) {
	switch {
	case tr.down:
		r.log.Warn("outbox relay: route down: "+tr.reason, "relay", r.id, "route", rs.name)
	case tr.up:
		probes := "probes"
		if tr.probes == 1 {
			probes = "probe"
		}
		r.log.Info("outbox relay: route up again after "+roundAge(tr.downFor).String()+", "+strconv.Itoa(tr.probes)+" "+probes,
			"relay", r.id, "route", rs.name)
	default:
		return
	}
	if r.alerts != nil {
		r.alerts.routeHealth(rs.name, tr.down, time.Now(), tr.reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.statementTimeout())
	defer cancel()
	if err := r.store.RecordRoute(ctx, r.id, rs.name, tr.down, tr.reason); err != nil {
		r.log.Warn("outbox relay: recording the route's state failed", "relay", r.id, "route", rs.name, "err", redact.Text(err.Error()))
	}
}
