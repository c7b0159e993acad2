package relay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

var (
	errBusy     = errors.New("503 Service Unavailable")
	errRejected = publisher.Permanent(errors.New("400 Bad Request"))
	errRefused  = publisher.Unavailable(errors.New("connection refused"))
)

// call is one publish call in a sequence: its results (nil: sent) and
// whether each message had never failed before.
type call struct {
	errs  []error
	fresh bool
	after time.Duration // since the previous call
	// want: the failures are charged; down: the route is down after it.
	charge, down bool
}

func calls(n int, c call) []call {
	out := make([]call, n)
	for i := range out {
		out[i] = c
	}
	return out
}

func errsOf(n int, err error) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// TestHealthRule feeds sequences of publish outcomes to a route's health
// and checks, call by call, whether the failures are charged to the
// messages and whether the route is down.
func TestHealthRule(t *testing.T) {
	cases := []struct {
		name  string
		calls []call
	}{
		{"a lone failing message on an idle route is the message's", []call{
			{errs: []error{errRejected}, fresh: true, charge: true},
		}},
		{"three new messages failing in a row take the route down, the third uncharged", []call{
			{errs: []error{errBusy}, fresh: true, charge: true},
			{errs: []error{errBusy}, fresh: true, charge: true, after: time.Second},
			{errs: []error{errBusy}, fresh: true, charge: false, down: true, after: time.Second},
		}},
		{"a whole call of new messages failing is the destination", []call{
			{errs: errsOf(50, errBusy), fresh: true, down: true},
		}},
		{"a call of new messages all failing is put back uncharged until proven", []call{
			{errs: errsOf(5, errRejected), fresh: true},
			{errs: errsOf(5, errRejected), fresh: true, after: time.Second},
			{errs: errsOf(5, errRejected), fresh: true, after: time.Second, down: true},
		}},
		{"two new messages failing together are theirs", []call{
			{errs: errsOf(2, errRejected), fresh: true, charge: true},
		}},
		{"new messages failing after a call of new ones was put back are put back too", []call{
			{errs: errsOf(5, errRejected), fresh: true},
			{errs: errsOf(2, errRejected), fresh: true},
			{errs: errsOf(1, errRejected), fresh: true},
		}},
		{"a success in the call makes the failures the messages'", []call{
			{errs: append(errsOf(5, errBusy), nil), fresh: true, charge: true},
			{errs: append(errsOf(5, errBusy), nil), fresh: true, charge: true},
		}},
		{"messages that already failed keep failing: charged, never down", calls(20, call{errs: errsOf(5, errBusy), charge: true})},
		{"a success between failures resets the count", []call{
			{errs: errsOf(2, errBusy), fresh: true, charge: true},
			{errs: []error{nil}, fresh: true, charge: true},
			{errs: errsOf(2, errBusy), fresh: true, charge: true},
		}},
		{"failures far apart do not add up", []call{
			{errs: []error{errRejected}, fresh: true, charge: true},
			{errs: []error{errRejected}, fresh: true, charge: true, after: time.Minute},
			{errs: []error{errRejected}, fresh: true, charge: true, after: time.Minute},
		}},
		{"an unreachable destination is down at once", []call{
			{errs: []error{errRefused}, fresh: false, down: true},
		}},
		{"an unreachable message among sent ones leaves the route up (deliver puts it back uncharged)", []call{
			{errs: []error{errRefused, nil}, fresh: true, charge: true},
		}},
		{"Retry-After holds the route without taking it down", []call{
			{errs: errsOf(5, publisher.RetryAfter(errBusy, 3*time.Second)), fresh: true, charge: true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHealth(Route{})
			now := time.Unix(1000, 0)
			for i, cl := range c.calls {
				now = now.Add(cl.after)
				res := make([]result, len(cl.errs))
				for j, err := range cl.errs {
					res[j] = result{err: err, fresh: cl.fresh}
				}
				charge, _, _ := h.observe(now, res, callInfo{})
				down, _, _ := h.state()
				if charge != cl.charge || down != cl.down {
					t.Fatalf("call %d: charged %v, down %v; want %v, %v", i, charge, down, cl.charge, cl.down)
				}
			}
		})
	}
}

// TestHealthCallsInFlight: the workers publish to one route side by
// side. A small call of new messages that fails while others are out,
// with no success since it left, is put back uncharged (once per
// message); a success since it left makes its failures the messages'.
func TestHealthCallsInFlight(t *testing.T) {
	h := newHealth(Route{})
	ctx := context.Background()
	now := time.Unix(1000, 0)
	h.acquire(ctx, 20) // another worker's call, still out
	h.acquire(ctx, 2)
	fail := func(ids ...int64) []result {
		var res []result
		for _, id := range ids {
			res = append(res, result{err: errRejected, fresh: true, id: id})
		}
		return res
	}
	if charge, wait, _ := h.observe(now.Add(time.Millisecond), fail(1, 2), callInfo{start: now, slots: 2}); charge || wait <= 0 {
		t.Fatalf("failed while another call was out: charged %v, wait %v; want put back", charge, wait)
	}
	// The route works (the other call went through); the same messages
	// fail again in a call that left after that, while calls are still
	// out: theirs.
	h.observe(now.Add(1500*time.Millisecond), []result{{id: 8}}, callInfo{start: now, slots: 20})
	if charge, _, _ := h.observe(now.Add(2*time.Second+time.Millisecond), fail(1, 2), callInfo{start: now.Add(2 * time.Second), slots: 2}); !charge {
		t.Fatal("a message put back once for calls in flight was spared again")
	}
	// A success on the route since the call left: the failure is the message's.
	h.observe(now.Add(3*time.Second), []result{{id: 9}}, callInfo{start: now.Add(2 * time.Second), slots: 20})
	if charge, _, _ := h.observe(now.Add(4*time.Second), fail(3), callInfo{start: now.Add(2 * time.Second), slots: 2}); !charge {
		t.Fatal("failure after a success since the call left was not charged")
	}
	// Nothing else out: a lone failure is the message's.
	h.release(20)
	if charge, _, _ := h.observe(now.Add(5*time.Second), fail(4), callInfo{start: now.Add(5 * time.Second), slots: 2}); !charge {
		t.Fatal("a lone call's failure was not charged")
	}
	if down, _, _ := h.state(); down {
		t.Fatal("route down")
	}
}

// TestHealthRandomHalfNeverDown: a destination failing half the
// deliveries at random, in calls of any size, is never declared down.
func TestHealthRandomHalfNeverDown(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := newHealth(Route{})
	now := time.Unix(1000, 0)
	for i := range 5000 {
		n := 4 + rng.IntN(60)
		res := make([]result, n)
		for j := range res {
			if rng.IntN(2) == 0 {
				res[j].err = errBusy
			}
			res[j].fresh = rng.IntN(3) > 0
		}
		now = now.Add(10 * time.Millisecond)
		h.observe(now, res, callInfo{})
		if down, _, _ := h.state(); down {
			t.Fatalf("call %d: route down", i)
		}
	}
	if down, _, _ := h.state(); down {
		t.Fatal("route down")
	}
}

// TestHealthProbes: a route that is down admits one probe when it is due,
// at intervals doubling from ProbeMin to ProbeMax, nothing in between,
// and comes up when a probe goes through, then ramps up its window.
func TestHealthProbes(t *testing.T) {
	h := newHealth(Route{ProbeMin: time.Second, ProbeMax: 4 * time.Second, MaxInFlight: 16})
	now := time.Unix(1000, 0)
	fail := []result{{err: errBusy, fresh: true}}
	_, _, tr := h.observe(now, errResults(20), callInfo{})
	if !tr.down || !strings.Contains(tr.reason, "503") {
		t.Fatalf("transition %+v, want down with the reason", tr)
	}
	var gaps []time.Duration
	last := now
	for probes := 0; probes < 5; {
		now = now.Add(100 * time.Millisecond)
		mode, wait, why := h.admit(now)
		switch mode {
		case admitSend:
			t.Fatal("a route that is down admitted a publish")
		case admitWait:
			if wait <= 0 || !strings.Contains(why, "route down") {
				t.Fatalf("wait %v %q", wait, why)
			}
			continue
		}
		if m, _, _ := h.admit(now); m != admitWait {
			t.Fatal("a second probe was admitted while one is in flight")
		}
		gaps = append(gaps, now.Sub(last).Round(time.Second))
		last = now
		probes++
		if charge, _, _ := h.observe(now, fail, callInfo{probe: true}); charge {
			t.Fatal("a failed probe was charged")
		}
	}
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
	if fmt.Sprint(gaps) != fmt.Sprint(want) {
		t.Fatalf("probe gaps %v, want %v", gaps, want)
	}
	now = now.Add(5 * time.Second)
	if m, _, _ := h.admit(now); m != admitProbe {
		t.Fatal("no probe when due")
	}
	_, _, tr = h.observe(now, []result{{}}, callInfo{probe: true})
	if !tr.up || tr.probes != 6 || tr.downFor <= 0 {
		t.Fatalf("transition %+v, want up after 6 probes", tr)
	}
	// Slow start: 1, 2, 4, 8 in flight, then the route's MaxInFlight.
	var windows []int
	for range 5 {
		n := h.acquire(context.Background(), 100)
		windows = append(windows, n)
		h.release(n)
		h.observe(now, make([]result, n), callInfo{})
	}
	if fmt.Sprint(windows) != "[1 2 4 8 16]" {
		t.Fatalf("slow start windows %v", windows)
	}
}

func errResults(n int) []result {
	res := make([]result, n)
	for i := range res {
		res[i] = result{err: errBusy, fresh: true}
	}
	return res
}

// TestHealthRetryAfterHolds: a Retry-After holds the whole route for that
// long; no publish is admitted meanwhile, and when it ends one message
// goes first.
func TestHealthRetryAfterHolds(t *testing.T) {
	h := newHealth(Route{})
	now := time.Unix(1000, 0)
	h.observe(now, []result{{err: publisher.RetryAfter(errBusy, 3*time.Second), fresh: true}, {}}, callInfo{})
	if m, wait, _ := h.admit(now.Add(time.Second)); m != admitWait || wait != 2*time.Second {
		t.Fatalf("admit: %v %v, want a 2s wait", m, wait)
	}
	if m, _, _ := h.admit(now.Add(3 * time.Second)); m != admitProbe {
		t.Fatal("the first publish after the Retry-After is not a probe")
	}
}

// TestHealthRetryAfterProbeRamp: when a hold ends the route gets one
// message and nothing else until it is answered; another wait holds it
// again (one request per hold, however much is pending), a success ends
// the hold and the route ramps up from one message in flight. Nothing is
// charged meanwhile.
func TestHealthRetryAfterProbeRamp(t *testing.T) {
	h := newHealth(Route{MaxInFlight: 64})
	now := time.Unix(1000, 0)
	limited := func(n int) []result {
		res := make([]result, n)
		for i := range res {
			res[i] = result{err: publisher.RetryAfter(errBusy, 3*time.Second), fresh: true, id: int64(i)}
		}
		return res
	}
	if charge, wait, _ := h.observe(now, limited(40), callInfo{slots: 40}); wait != 3*time.Second {
		t.Fatalf("40 messages asked to wait 3s: charge %v wait %v", charge, wait)
	}
	probes := 0
	for range 5 {
		for step := 0; step < 30; step++ { // 100 ms steps over the hold
			now = now.Add(100 * time.Millisecond)
			mode, _, _ := h.admit(now)
			if mode == admitSend {
				t.Fatalf("a full publish admitted %v after a Retry-After", now.Sub(time.Unix(1000, 0)))
			}
			if mode != admitProbe {
				continue
			}
			probes++
			if m, _, _ := h.admit(now); m != admitWait {
				t.Fatal("a second message admitted while the probe is out")
			}
			h.observe(now, limited(1), callInfo{probe: true, slots: 1})
			break
		}
	}
	if probes != 5 {
		t.Fatalf("%d probes over 5 holds, want 5 (one per hold)", probes)
	}
	now = now.Add(3 * time.Second)
	if m, _, _ := h.admit(now); m != admitProbe {
		t.Fatal("no probe after the last hold")
	}
	if charge, wait, _ := h.observe(now, []result{{}}, callInfo{probe: true, slots: 1}); !charge || wait != 0 {
		t.Fatalf("a probe that went through: charge %v wait %v", charge, wait)
	}
	var windows []int
	for range 8 {
		if m, _, _ := h.admit(now); m != admitSend {
			t.Fatalf("admit %v after the probe went through, want send", m)
		}
		n := h.acquire(context.Background(), 100)
		windows = append(windows, n)
		h.release(n)
		h.observe(now, make([]result, n), callInfo{slots: n})
	}
	if fmt.Sprint(windows) != "[1 2 4 8 16 32 64 64]" {
		t.Fatalf("ramp after the hold %v, want slow start from 1 to MaxInFlight", windows)
	}
}

// TestHealthRetryAfterProbeOtherFailure: a probe after a hold answered
// with a failure that asks no wait ends the hold (the destination is
// answering); the route ramps up from one message and the failure is
// the message's.
func TestHealthRetryAfterProbeOtherFailure(t *testing.T) {
	h := newHealth(Route{})
	now := time.Unix(1000, 0)
	h.observe(now, []result{{err: publisher.RetryAfter(errBusy, time.Second), fresh: true}, {}}, callInfo{})
	now = now.Add(time.Second)
	if m, _, _ := h.admit(now); m != admitProbe {
		t.Fatal("no probe after the hold")
	}
	if charge, _, _ := h.observe(now, []result{{err: errBusy}}, callInfo{probe: true}); !charge {
		t.Fatal("a plain failure of a message that failed before, after the hold, not charged")
	}
	if m, _, _ := h.admit(now); m != admitSend {
		t.Fatalf("admit %v, want send: the hold is over", m)
	}
	if n := h.acquire(context.Background(), 100); n != 1 {
		t.Fatalf("%d in flight after the hold, want 1 (slow start)", n)
	}
}

// TestHealthShortHoldProbe: while the first message after a short hold (a
// client's backpressure, 100 ms) is out, the others are put back for the
// hold's length, not a whole probe interval; a probe call that reports
// nothing (cut short by a shutdown) does not end the hold.
func TestHealthShortHoldProbe(t *testing.T) {
	h := newHealth(Route{})
	now := time.Unix(1000, 0)
	h.observe(now, []result{{err: publisher.RetryAfter(errBusy, 100*time.Millisecond), fresh: true}}, callInfo{})
	now = now.Add(100 * time.Millisecond)
	if m, _, _ := h.admit(now); m != admitProbe {
		t.Fatal("no probe after the hold")
	}
	if m, wait, _ := h.admit(now); m != admitWait || wait != 100*time.Millisecond {
		t.Fatalf("admit while the probe is out: %v %v, want a 100ms wait", m, wait)
	}
	h.observe(now, nil, callInfo{probe: true})
	if m, _, _ := h.admit(now); m != admitProbe {
		t.Fatalf("admit %v after a probe that reported nothing, want another probe", m)
	}
}

// TestHealthMaxRetryAfter: a wait longer than the route's MaxRetryAfter
// holds it for MaxRetryAfter; the default is an hour.
func TestHealthMaxRetryAfter(t *testing.T) {
	now := time.Unix(1000, 0)
	year := publisher.RetryAfter(errBusy, 365*24*time.Hour)
	for _, c := range []struct {
		rt   Route
		want time.Duration
	}{
		{Route{}, DefaultMaxRetryAfter},
		{Route{MaxRetryAfter: 5 * time.Second}, 5 * time.Second},
		{Route{MaxRetryAfter: 48 * time.Hour}, 48 * time.Hour},
	} {
		h := newHealth(c.rt)
		if _, wait, _ := h.observe(now, []result{{err: year, fresh: true}}, callInfo{}); wait != c.want {
			t.Errorf("MaxRetryAfter %v: wait %v, want %v", c.rt.MaxRetryAfter, wait, c.want)
		}
		if _, wait, _ := h.admit(now); wait != c.want {
			t.Errorf("MaxRetryAfter %v: held %v, want %v", c.rt.MaxRetryAfter, wait, c.want)
		}
		if d := h.holdWait(365 * 24 * time.Hour); d != c.want {
			t.Errorf("MaxRetryAfter %v: holdWait %v", c.rt.MaxRetryAfter, d)
		}
	}
}

// TestRoundRetryAfterOneRequest: rounds over 40 keys meeting a
// destination that asks every request to wait publish one message per
// hold after the first, charge nothing and put every message back for the
// hold (at most MaxRetryAfter); once the destination takes them, the rest
// flow.
func TestRoundRetryAfterOneRequest(t *testing.T) {
	var rows []store.Row
	for i := range 40 {
		r := row(int64(i+1), "order.created", fmt.Sprintf("k%d", i), "")
		r.MessageID = fmt.Sprintf("m%d", i+1)
		rows = append(rows, r)
	}
	st := &fakeStore{}
	limited := true
	published := 0
	r := newRouteRelay(t, st, Route{Pattern: "order.*", MaxRetryAfter: 20 * time.Millisecond, Publisher: publishFunc(func(*publisher.Envelope) error {
		published++
		if limited {
			return publisher.RetryAfter(errBusy, time.Hour) // capped at 20ms
		}
		return nil
	})})
	w := &worker{batchSize: 100, wake: make(chan struct{}, 1)}
	round := func() {
		t.Helper()
		st.rows, st.settled, published = slices.Clone(rows), nil, 0
		if _, err := r.round(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		for _, o := range st.settled {
			if o.CountAttempt && o.Status != store.StatusSent {
				t.Fatalf("message %d charged while the destination asks to wait: %+v", o.ID, o)
			}
			if o.Status == store.StatusPending && (o.Delay <= 0 || o.Delay > time.Second+20*time.Millisecond) {
				t.Fatalf("message %d put back for %v, want within the 20ms hold (plus a probe interval)", o.ID, o.Delay)
			}
		}
	}
	round()
	if published != 40 {
		t.Fatalf("first round published %d, want 40", published)
	}
	for range 3 {
		time.Sleep(30 * time.Millisecond)
		round()
		if published != 1 {
			t.Fatalf("a round after the hold published %d, want 1", published)
		}
	}
	limited = false
	time.Sleep(30 * time.Millisecond)
	round()
	if published != 40 {
		t.Fatalf("the round after the destination took the probe published %d, want 40 (probe, then slow start)", published)
	}
}

// TestRoundOutageChargesNothing: a round whose every new message fails
// takes the route down and charges none of them; the next round, once a
// probe is due, publishes one message only, and when it goes through the
// rest flow. A poison message among good ones goes dead meanwhile.
func TestRoundOutageChargesNothing(t *testing.T) {
	var rows []store.Row
	for i := range 20 {
		rows = append(rows, row(int64(i+1), "order.created", "", ""))
	}
	st := &fakeStore{rows: rows}
	failing := true
	published := 0
	r := newTestRelay(t, st, publishFunc(func(e *publisher.Envelope) error {
		published++
		if failing || e.ID == "m3" {
			return errBusy
		}
		return nil
	}))
	r.router.routes[0].health.probeMin = time.Millisecond
	w := &worker{batchSize: 100, wake: make(chan struct{}, 1)}
	if _, err := r.round(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 20; id++ {
		if o, _ := st.outcome(t, id); o.CountAttempt || o.Status != store.StatusPending {
			t.Fatalf("message %d during the outage: %+v, want pending and not counted", id, o)
		}
	}
	if down, _, _ := r.router.routes[0].health.state(); !down {
		t.Fatal("route not down")
	}
	failing = false
	time.Sleep(5 * time.Millisecond)
	st.rows, st.settled, published = rows, nil, 0
	rows[2].Attempts = 1 // m3 failed before: a failure of its own
	if _, err := r.round(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if published != 20 {
		t.Fatalf("published %d after recovery, want 20 (a probe, then the rest)", published)
	}
	if o, _ := st.outcome(t, 3); !o.CountAttempt {
		t.Fatalf("m3 failing while the others go through: %+v, want charged", o)
	}
	if o, _ := st.outcome(t, 20); o.Status != store.StatusSent {
		t.Fatalf("m20: %+v, want sent", o)
	}
}

// TestRoundLaterWaveFailuresAreTheirs: messages that fail in a later wave
// of a batch, after others of the route went through in an earlier one,
// are charged even though their own call had no success.
func TestRoundLaterWaveFailuresAreTheirs(t *testing.T) {
	var rows []store.Row
	for i := range 4 {
		key := string(rune('a' + i))
		rows = append(rows, row(int64(2*i+1), "order.created", key, ""), row(int64(2*i+2), "order.created", key, ""))
	}
	st := &fakeStore{rows: rows}
	r := newTestRelay(t, st, publishFunc(func(e *publisher.Envelope) error {
		if e.ID[1]%2 == 0 { // the second message of each key
			return errRejected
		}
		return nil
	}))
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 8; id++ {
		o, _ := st.outcome(t, id)
		want := store.StatusSent
		if id%2 == 0 {
			want = store.StatusDead
		}
		if o.Status != want {
			t.Errorf("message %d: %+v, want %s", id, o, want)
		}
	}
	if down, _, _ := r.router.routes[0].health.state(); down {
		t.Fatal("route down")
	}
}

// TestRoundFailedProbeRotates: a failed probe is put back for longer than
// the messages held back with it, so that the next probe is another
// message.
func TestRoundFailedProbeRotates(t *testing.T) {
	st := &fakeStore{}
	r := newTestRelay(t, st, publishFunc(func(*publisher.Envelope) error { return errBusy }))
	h := r.router.routes[0].health
	now := time.Now()
	h.observe(now.Add(-time.Minute), errResults(20), callInfo{}) // down, a probe due
	st.rows = []store.Row{row(1, "order.created", "", ""), row(2, "order.created", "", "")}
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	probe, _ := st.outcome(t, 1)
	held, _ := st.outcome(t, 2)
	if probe.CountAttempt || held.CountAttempt || probe.Delay <= held.Delay {
		t.Fatalf("probe %+v, held back %+v: want neither counted, the probe put back for longer", probe, held)
	}
}

// TestRoundOutageChargesNoKeyedMessage: a batch of few keys, many messages
// each, meeting an outage charges none of them, although its keys publish
// in lanes of one or two messages a call.
func TestRoundOutageChargesNoKeyedMessage(t *testing.T) {
	var rows []store.Row
	for i := range 60 {
		rows = append(rows, row(int64(i+1), "order.created", fmt.Sprintf("k%d", i%6), ""))
	}
	st := &fakeStore{rows: rows}
	r := newTestRelay(t, st, publishFunc(func(e *publisher.Envelope) error { return errBusy }))
	w := &worker{batchSize: 100, wake: make(chan struct{}, 1)}
	if _, err := r.round(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 60; id++ {
		if o, ok := st.outcome(t, id); ok && (o.CountAttempt || o.Status != store.StatusPending) {
			t.Fatalf("message %d during the outage: %+v, want pending and not counted", id, o)
		}
	}
}

// TestRoundUnreachableAmongSentChargesNothing: messages that fail as
// unavailable in calls where others go through (a connection of a pool
// still coming back) are put back uncharged, each time for longer, and
// the route stays up; a transient failure beside them is charged.
func TestRoundUnreachableAmongSentChargesNothing(t *testing.T) {
	st := &fakeStore{}
	r := newTestRelay(t, st, publishFunc(func(e *publisher.Envelope) error {
		switch e.ID {
		case "m2", "m4":
			return errRefused
		case "m3":
			return errBusy
		}
		return nil
	}))
	h := r.router.routes[0].health
	w := &worker{batchSize: 100, wake: make(chan struct{}, 1)}
	var delays []time.Duration
	for round := range 3 {
		st.rows, st.settled = nil, nil
		for _, id := range []int64{1, 2, 3, 4, 5} {
			rw := row(id, "order.created", "", "")
			rw.Attempts = round
			st.rows = append(st.rows, rw)
		}
		if _, err := r.round(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		for _, id := range []int64{2, 4} {
			if o, _ := st.outcome(t, id); o.CountAttempt || o.Status != store.StatusPending || !strings.Contains(o.Error, "not counted") {
				t.Fatalf("round %d, message %d unreachable among sent ones: %+v, want pending and not counted", round, id, o)
			}
		}
		o, _ := st.outcome(t, 2)
		delays = append(delays, o.Delay)
		if o, _ := st.outcome(t, 3); !o.CountAttempt {
			t.Fatalf("round %d, a transient failure among sent ones: %+v, want charged", round, o)
		}
		if o, _ := st.outcome(t, 5); o.Status != store.StatusSent {
			t.Fatalf("round %d, message 5: %+v, want sent", round, o)
		}
		if down, _, _ := h.state(); down {
			t.Fatalf("round %d: route down while messages went through", round)
		}
	}
	if delays[0] != h.probeMin || delays[1] != 2*h.probeMin || delays[2] != 4*h.probeMin {
		t.Fatalf("waits of a message failing as unavailable three times: %v, want %v doubling", delays, h.probeMin)
	}
}
