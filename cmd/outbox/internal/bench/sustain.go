package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

// The sustain workload: the highest producer rate the relay keeps up
// with. Each trial is a steady run at one rate, in a database made for it
// (so the dead rows of one trial do not slow the next), whose producers
// stop when its window ends. The search doubles the rate from --start
// while trials are sustained, then bisects between the highest sustained
// rate and the lowest failed one.

// What a trial must show for its rate to count as sustained.
const (
	// maxBacklogGrowth is how fast, in messages per second, the backlog
	// (committed, not yet confirmed) may grow over the window.
	maxBacklogGrowth = 100
	// minAchieved is the share of the rate the producers must commit over
	// the window; below it they, not the relay, are what fell short.
	minAchieved = 0.99
)

// A trial's verdict, and what bounds the sustained rate.
const (
	verdictSustained = "sustained"
	verdictRelay     = "relay"     // the backlog grew: the relay fell behind
	verdictProducers = "producers" // the relay kept up, the producers fell short of the rate
	boundMaxRate     = "max-rate"  // --max-rate itself was sustained
)

// sustainResult is the sustain workload's report.
type sustainResult struct {
	// Rate is the highest rate sustained, in messages per second; 0 when
	// not even the lowest one tried was.
	Rate float64 `json:"sustained_rate"`
	// FailedRate is the lowest rate tried above Rate that was not
	// sustained; 0 when none was (Rate is --max-rate).
	FailedRate float64 `json:"failed_rate,omitempty"`
	// Bound is what failed at FailedRate: "relay" (it fell behind) or
	// "producers" (they could not commit the rate; the relay kept up with
	// what they did), or "max-rate" when no rate failed.
	Bound string `json:"bound"`
	// Trial is the number, from 1, of the trial at Rate; CommitToConfirm
	// and Machine are its figures (its whole steady report is in Trials).
	Trial           int             `json:"trial,omitempty"`
	CommitToConfirm *latencySummary `json:"commit_to_confirm_ms,omitempty"`
	Machine         *machineCPU     `json:"machine,omitempty"`
	// The criteria every trial was judged by.
	MaxBacklogGrowth float64        `json:"max_backlog_growth_per_second"`
	MinAchieved      float64        `json:"min_achieved_ratio"`
	Trials           []sustainTrial `json:"trials"`
}

// sustainTrial is one trial of the search.
type sustainTrial struct {
	Rate float64 `json:"rate"`
	// Verdict is "sustained", "relay" (the backlog grew faster than the
	// criterion allows) or "producers" (the relay kept up, but the
	// producers committed less of the rate than it asks).
	Verdict string `json:"verdict"`
	// BacklogGrowth is how fast the backlog grew over the window, in
	// messages per second: the slope of the least-squares line through
	// its samples, taken every 100 ms.
	BacklogGrowth float64 `json:"backlog_growth_per_second"`
	// LoadAverage is the machine's one-minute load average when the trial
	// started → when it ended, the trial's own load included.
	LoadAverage string `json:"load_average"`
	// Steady is the trial's steady report. After a trial whose relay fell
	// behind the bench does not wait for the backlog: its latencies count
	// only the messages confirmed by then (see unconfirmed).
	Steady *steadyResult `json:"steady"`
}

// minRate is the lowest rate a search tries: at least one message per
// second, and ten messages in the window.
func (o *options) minRate() float64 {
	return max(1, math.Ceil(10/o.window.Seconds()))
}

// rateSearch bounds a search for the highest sustained rate.
type rateSearch struct {
	start, min, max float64
	// precision ends the bisection: the gap between the highest sustained
	// rate and the lowest failed one is under this share of the former.
	precision float64
}

// searchRate returns the highest rate, in whole messages per second, that
// trial finds sustained, and the lowest rate above it that it did not (0
// when s.max was sustained). From s.start it doubles the rate while
// trials are sustained, up to s.max, or halves it while they are not,
// down to s.min (best is 0 when even that failed); then it bisects
// between the highest sustained rate and the lowest failed one until
// their gap is under s.precision of the former. No rate is tried twice;
// an error of trial ends the search.
func searchRate(s rateSearch, trial func(rate float64) (bool, error)) (best, failed float64, err error) {
	var lo, hi float64 // highest sustained, lowest failed; 0 while none
	rate := math.Round(s.start)
	for {
		ok, err := trial(rate)
		if err != nil {
			return lo, hi, err
		}
		if ok {
			lo = rate
		} else {
			hi = rate
		}
		switch {
		case hi == 0: // all sustained so far
			if lo >= s.max {
				return lo, 0, nil
			}
			rate = min(2*lo, s.max)
		case lo == 0: // none sustained so far
			rate = max(math.Floor(hi/2), s.min)
			if rate >= hi {
				return 0, hi, nil
			}
		default:
			rate = math.Round((lo + hi) / 2)
			if hi-lo < s.precision*lo || rate <= lo || rate >= hi {
				return lo, hi, nil
			}
		}
	}
}

// backlogGrowth is how fast the backlog grew from second from to second
// to of a run, in messages per second: the slope of the least-squares
// line through the samples taken then; 0 with fewer than two.
func backlogGrowth(points []backlogPoint, from, to float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, p := range points {
		if p.At < from || p.At > to {
			continue
		}
		x, y := p.At, float64(p.Backlog)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	d := n*sxx - sx*sx
	if n < 2 || d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// sustainRun is one run of the sustain workload.
type sustainRun struct {
	o        *options
	d        store.Dialect
	dest     *destination
	stderr   io.Writer
	runID    string
	res      *sustainResult
	cleanErr error // what could not be removed after a trial
}

// sustain runs the sustain workload: the search over trials, each in a
// database of its own that it removes again. cleanErr is what could not
// be removed.
func sustain(ctx context.Context, o *options, dest *destination, stderr io.Writer) (res *result, runErr, cleanErr error) {
	d, _, err := dburl.Parse(o.dbURL)
	if err != nil {
		return nil, err, nil
	}
	s := &sustainRun{o: o, d: d, dest: dest, stderr: stderr, runID: newRunID(),
		res: &sustainResult{MaxBacklogGrowth: maxBacklogGrowth, MinAchieved: minAchieved}}
	res = newResult(o, d, dest)
	res.Sustain = s.res
	search := rateSearch{start: o.start, min: o.minRate(), max: o.maxRate, precision: o.precision}
	best, failed, err := searchRate(search, func(rate float64) (bool, error) { return s.trial(ctx, rate) })
	if err != nil {
		return nil, err, s.cleanErr
	}
	s.summarize(best, failed)
	return res, nil, nil
}

// trial runs one trial at rate in a fresh database and reports whether
// the rate was sustained.
func (s *sustainRun) trial(ctx context.Context, rate float64) (bool, error) {
	n := len(s.res.Trials) + 1
	fmt.Fprintf(s.stderr, "sustain: trial %d: %s msg/s, %s (+%s warm-up), in a fresh database\n", n, fmtFloat(rate), s.o.window, s.o.warmup)
	url, drop, err := freshDatabase(ctx, s.o.dbURL, s.d, fmt.Sprintf("bench_sustain_%s_%d", s.runID, n))
	if err != nil {
		return false, err
	}
	to := *s.o
	to.dbURL, to.rate, to.duration = url, rate, s.o.window
	t, runErr, closeErr := inScratch(ctx, &to, s.dest, s.stderr, (*bench).sustainTrial)
	if err := errors.Join(closeErr, drop()); err != nil {
		s.cleanErr = errors.Join(s.cleanErr, err)
		if runErr == nil {
			runErr = errors.New("sustain: stopped: what a trial made could not all be removed")
		}
	}
	if runErr != nil {
		return false, runErr
	}
	s.res.Trials = append(s.res.Trials, *t)
	fmt.Fprintf(s.stderr, "sustain: trial %d: %s msg/s: %s (backlog %+.1f msg/s, producers %s msg/s)\n",
		n, fmtFloat(rate), t.Verdict, t.BacklogGrowth, fmtFloat(math.Round(t.Steady.AchievedRate)))
	return t.Verdict == verdictSustained, nil
}

// inScratch opens a bench on o's database, which is the run's own (the
// caller made it and drops it), runs fn on it and closes what it opened.
func inScratch[T any](ctx context.Context, o *options, dest *destination, stderr io.Writer, fn func(*bench, context.Context) (T, error)) (res T, runErr, closeErr error) {
	b, err := open(ctx, o, dest, stderr)
	if err != nil {
		return res, err, nil
	}
	b.scratch = true
	res, runErr = fn(b, ctx)
	return res, runErr, b.close()
}

// sustainTrial migrates the trial's database, runs steady's producers at
// --rate until the window ends and judges the rate.
func (b *bench) sustainTrial(ctx context.Context) (*sustainTrial, error) {
	if err := b.conn.migrate(ctx); err != nil {
		return nil, err
	}
	b.migrated = true
	o := b.o
	t := &sustainTrial{Rate: o.rate, LoadAverage: loadAverage()}
	from := o.warmup.Seconds()
	// A backlog that grew would take as long again to drain: the bench
	// waits for the confirmations only when the relay kept up.
	_, res, err := b.runSteady(ctx, "sustain "+fmtFloat(o.rate)+" msg/s", true, func(run *steadyRun, _ *steadyResult) bool {
		t.BacklogGrowth = backlogGrowth(run.backlog, from, from+o.window.Seconds())
		return t.BacklogGrowth <= maxBacklogGrowth
	})
	if err != nil {
		return nil, err
	}
	t.Steady = res
	switch {
	case t.BacklogGrowth > maxBacklogGrowth:
		t.Verdict = verdictRelay
	case res.AchievedRate < minAchieved*o.rate:
		t.Verdict = verdictProducers
	default:
		t.Verdict = verdictSustained
	}
	t.LoadAverage += " → " + loadAverage()
	return t, nil
}

// summarize fills in the result of a search that ended at best and
// failed.
func (s *sustainRun) summarize(best, failed float64) {
	r := s.res
	r.Rate, r.FailedRate = best, failed
	if failed == 0 {
		r.Bound = boundMaxRate
	}
	for i, t := range r.Trials {
		switch {
		case t.Rate == best && t.Verdict == verdictSustained:
			r.Trial = i + 1
			r.CommitToConfirm, r.Machine = &t.Steady.CommitToConfirm, t.Steady.Machine
		case t.Rate == failed:
			r.Bound = t.Verdict
		}
	}
}

// trialAt is the trial at rate; nil if none.
func (r *sustainResult) trialAt(rate float64) *sustainTrial {
	for i := range r.Trials {
		if r.Trials[i].Rate == rate {
			return &r.Trials[i]
		}
	}
	return nil
}

func writeSustain(w io.Writer, s *sustainResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "sustained\t%s\n", s.headline())
	fmt.Fprintf(tw, "criteria\tover each trial's window the backlog (committed, not confirmed) grows by at most %s msg/s, and the producers commit at least %g%% of the rate\n",
		fmtFloat(s.MaxBacklogGrowth), s.MinAchieved*100)
	tw.Flush()
	fmt.Fprintln(w)
	tt := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tt, "trial\trate/s\tachieved/s\tbacklog growth/s\tlate sends\tcommit→confirm p50 ms\tp99 ms\tload average\tverdict\t  machine cpu")
	for i, t := range s.Trials {
		st := t.Steady
		p50, p99 := "—", "—"
		if t.Verdict != verdictRelay {
			p50, p99 = fmt.Sprintf("%.2f", st.CommitToConfirm.P50), fmt.Sprintf("%.2f", st.CommitToConfirm.P99)
		}
		fmt.Fprintf(tt, "%d\t%s\t%s\t%+.1f\t%s\t%s\t%s\t%s\t%s\t  %s\n", i+1, fmtFloat(t.Rate), fmtFloat(math.Round(st.AchievedRate*10)/10),
			t.BacklogGrowth, commas(st.LateSends), p50, p99, t.LoadAverage, t.Verdict, st.Machine)
	}
	tt.Flush()
	if s.Trial > 0 {
		fmt.Fprintf(w, "\nat %s msg/s (trial %d):\n", fmtFloat(s.Rate), s.Trial)
		writeSteady(w, s.Trials[s.Trial-1].Steady)
	}
}

// headline says the sustained rate and what bounds it.
func (s *sustainResult) headline() string {
	if s.Bound == boundMaxRate {
		return fmt.Sprintf("%s msg/s, --max-rate: the relay kept up with the highest rate tried", fmtFloat(s.Rate))
	}
	rate := "none"
	if s.Rate > 0 {
		rate = fmtFloat(s.Rate) + " msg/s"
	}
	f := s.trialAt(s.FailedRate)
	if f == nil {
		return rate
	}
	if f.Verdict == verdictProducers {
		return fmt.Sprintf("%s; at %s msg/s the producers committed %s msg/s and the relay kept up: the producers, not the relay, are the bound here (more --clients, or a faster database, may go higher)",
			rate, fmtFloat(f.Rate), fmtFloat(math.Round(f.Steady.AchievedRate)))
	}
	return fmt.Sprintf("%s; at %s msg/s the relay fell behind (backlog %+.1f msg/s)", rate, fmtFloat(f.Rate), f.BacklogGrowth)
}
