package bench

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSustainSearch: whatever rate the trials are sustained below, the
// search ends with the highest sustained rate under it and the lowest
// failed one at or over it, within the precision of each other; it
// doubles up from the start, halves down from it, stops at the cap and
// tries no rate twice.
func TestSustainSearch(t *testing.T) {
	s := rateSearch{start: 500, min: 1, max: 100000, precision: 0.1}
	for _, limit := range []float64{0.5, 1.5, 3, 7, 100, 499, 500, 501, 777, 1000, 3333, 12345, 65000, 99999.5, 100000, 200000} {
		var tried []float64
		best, failed, err := searchRate(s, func(rate float64) (bool, error) {
			if slices.Contains(tried, rate) {
				t.Errorf("limit %g: %g tried again (after %v)", limit, rate, tried)
			}
			if rate < s.min || rate > s.max || rate != math.Round(rate) {
				t.Errorf("limit %g: tried %g", limit, rate)
			}
			tried = append(tried, rate)
			return rate < limit, nil
		})
		switch {
		case err != nil:
			t.Errorf("limit %g: %v", limit, err)
		case len(tried) > 30:
			t.Errorf("limit %g: %d trials: %v", limit, len(tried), tried)
		case limit > s.max:
			if best != s.max || failed != 0 {
				t.Errorf("limit %g: best %g, failed %g; want the cap and none (tried %v)", limit, best, failed, tried)
			}
		case limit <= s.min:
			if best != 0 || failed != s.min {
				t.Errorf("limit %g: best %g, failed %g; want none and the floor (tried %v)", limit, best, failed, tried)
			}
		case !(best < limit && failed >= limit):
			t.Errorf("limit %g: best %g, failed %g do not bracket it (tried %v)", limit, best, failed, tried)
		case failed-best >= s.precision*best && failed-best > 1:
			t.Errorf("limit %g: best %g, failed %g: not within %g%% (tried %v)", limit, best, failed, s.precision*100, tried)
		}
		if limit > s.start && !slices.Equal(tried[:2], []float64{500, 1000}) {
			t.Errorf("limit %g: tried %v, want a doubling from 500", limit, tried)
		}
		if limit <= s.start && limit > s.min && !slices.Equal(tried[:2], []float64{500, 250}) {
			t.Errorf("limit %g: tried %v, want a halving from 500", limit, tried)
		}
	}

	// A trial's error ends the search with what was found so far.
	boom := errors.New("boom")
	calls := 0
	best, _, err := searchRate(s, func(rate float64) (bool, error) {
		calls++
		if calls == 3 {
			return false, boom
		}
		return true, nil
	})
	if !errors.Is(err, boom) || calls != 3 || best != 1000 {
		t.Errorf("after an error: best %g, %d calls, %v", best, calls, err)
	}
}

// TestSustainBacklogGrowth: the growth is the slope of the samples inside
// the window, whatever the backlog was outside it and however it
// wobbles.
func TestSustainBacklogGrowth(t *testing.T) {
	var points []backlogPoint
	for i := range 200 {
		at := float64(i) / 10
		backlog := 5000 - 250*at // a warm-up's burst being worked off
		if at >= 5 {
			backlog = 40*at + float64(i%4)*25 // then a sawtooth rising 40/s
		}
		points = append(points, backlogPoint{At: at, Backlog: int64(backlog)})
	}
	if g := backlogGrowth(points, 5, 20); math.Abs(g-40) > 1 {
		t.Errorf("growth %.2f, want 40", g)
	}
	if g := backlogGrowth(points, 0, 4.9); math.Abs(g+250) > 1 {
		t.Errorf("growth %.2f, want -250", g)
	}
	if g := backlogGrowth(points, 30, 40); g != 0 {
		t.Errorf("growth over no sample %.2f, want 0", g)
	}
}

// TestSustainToNATS: a short search on SQLite to NATS JetStream finds a
// sustained rate, with its commit → confirm latency and each trial's
// backlog growth, and removes every trial's database and stream.
func TestSustainToNATS(t *testing.T) {
	reachable(t, "NATS", "127.0.0.1:4222")
	before := benchStreams(t)
	dir := t.TempDir()
	r := mustJSON(t, "sustain", "--db", "sqlite://"+filepath.Join(dir, "bench.db"), "--to", "nats://127.0.0.1:4222",
		"--start", "100", "--max-rate", "200", "--window", "2s", "--warmup", "300ms", "--clients", "4", "--keys", "10", "--payload-bytes", "100")
	s := r.Sustain
	if r.Workload != wSustain || s == nil || r.Settings.StartRate != 100 || r.Settings.MaxRate != 200 || r.Settings.WindowSeconds != 2 || r.Settings.Precision != 0.1 {
		t.Fatalf("report: %+v", r)
	}
	if s.Rate <= 0 || s.Trial < 1 || s.Trial > len(s.Trials) || s.CommitToConfirm == nil || s.CommitToConfirm.P99 <= 0 {
		t.Fatalf("sustained: %+v", s)
	}
	at := s.Trials[s.Trial-1]
	if at.Rate != s.Rate || at.Verdict != verdictSustained || at.Steady.CommitToConfirm.P99 != s.CommitToConfirm.P99 {
		t.Errorf("the trial at %g msg/s: %+v", s.Rate, at)
	}
	if s.Bound != boundMaxRate && s.trialAt(s.FailedRate) == nil {
		t.Errorf("bound %q at %g msg/s, which no trial ran", s.Bound, s.FailedRate)
	}
	for i, tr := range s.Trials {
		st := tr.Steady
		if st == nil || st.TargetRate != tr.Rate || st.Committed <= 0 || !strings.Contains(tr.LoadAverage, " → ") {
			t.Errorf("trial %d: %+v", i+1, tr)
			continue
		}
		switch tr.Verdict {
		case verdictSustained:
			if tr.BacklogGrowth > maxBacklogGrowth || st.AchievedRate < minAchieved*tr.Rate || st.Unconfirmed != 0 {
				t.Errorf("trial %d sustained: %+v, %+v", i+1, tr, st)
			}
		case verdictProducers:
			if tr.BacklogGrowth > maxBacklogGrowth || st.AchievedRate >= minAchieved*tr.Rate {
				t.Errorf("trial %d short of producers: %+v, %+v", i+1, tr, st)
			}
		case verdictRelay:
			if tr.BacklogGrowth <= maxBacklogGrowth {
				t.Errorf("trial %d: the relay fell behind with a backlog growing %.1f msg/s", i+1, tr.BacklogGrowth)
			}
		default:
			t.Errorf("trial %d: verdict %q", i+1, tr.Verdict)
		}
	}

	// Each trial ran in a file of its own, removed after it; --db's file
	// was never made.
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind in %s: %v", dir, left)
	}
	for name := range benchStreams(t) {
		if !before[name] {
			t.Errorf("left behind: stream %s", name)
		}
	}

	var table bytes.Buffer
	writeTable(&table, r)
	for _, want := range []string{"outbox bench sustain\n", "sustained  ", "backlog growth/s", "at " + fmtFloat(s.Rate) + " msg/s (trial ", "commit → confirm"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestSustainUsage: sustain refuses what it cannot search, and its help
// names its flags.
func TestSustainUsage(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "never.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--precision", "0"}, "--precision must be above 0"},
		{[]string{"--precision", "100%"}, "--precision must be above 0 and under 100%"},
		{[]string{"--precision", "ten"}, "want a percentage"},
		{[]string{"--start", "1000", "--max-rate", "500"}, "--start <= --max-rate"},
		{[]string{"--start", "2", "--window", "1s"}, "want 10 <= --start"},
		{[]string{"--max-rate", "2000000"}, "--max-rate <= 1000000"},
		{[]string{"--window", "0s"}, "--window must be positive"},
		{[]string{"--clients", "1,2"}, "--clients takes one number"},
		{[]string{"--max-rate", "1000000", "--window", "60s"}, "schedules more than"},
		{[]string{"--rate", "5"}, "unknown flag --rate"},
	} {
		code, out, errOut := benchRun(t, append([]string{"sustain", "--db", db}, tc.args...)...)
		if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
	code, out, _ := benchRun(t, "sustain", "--help")
	for _, want := range []string{"--start", "--max-rate", "--precision PERCENT", "(default 10%)", "--window", "--warmup", "--clients", "--to", "--relays", "--keys", "--payload-bytes", "--json"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("sustain --help: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
	if _, out, _ := benchRun(t, "--help"); !strings.Contains(out, "\n  sustain  ") {
		t.Errorf("--help does not list sustain:\n%s", out)
	}
}
