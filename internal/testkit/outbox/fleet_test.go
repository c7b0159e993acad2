package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// callLog records which database each publish call came from, in order.
type callLog struct {
	mu    sync.Mutex
	calls []string // the database (topic) of each call
	sent  map[string]int
}

func (l *callLog) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	l.mu.Lock()
	l.calls = append(l.calls, batch[0].Topic)
	for _, e := range batch {
		l.sent[e.Topic]++
	}
	l.mu.Unlock()
	time.Sleep(2 * time.Millisecond) // a destination that takes a moment
	return make([]error, len(batch))
}

func (*callLog) Close() error { return nil }

func (l *callLog) count(topic string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent[topic]
}

// TestFleetSharesWorkersFairly: a fleet member with one worker for all its
// databases serves two databases with a backlog in turns, so neither
// takes the other's share, and a third database's lone message goes out
// among the first calls instead of after the backlogs; the database list
// changes while it runs, a removed database's metrics series leave the
// registry, and every series carries its database label.
func TestFleetSharesWorkersFairly(t *testing.T) {
	coord := testdb.New(t, store.SQLite)
	dbs := map[string]*harness.Harness{}
	for _, name := range []string{"a", "b", "c"} {
		dbs[name] = harness.Over(t, harness.Case{Name: name, Dialect: store.SQLite}, testdb.New(t, store.SQLite))
	}
	for _, name := range []string{"a", "b"} {
		for i := 0; i < 300; i += 100 {
			if _, err := dbs[name].Enqueue(t.Context(), relaytest.Messages(name, i, 100, 10), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := dbs["c"].Enqueue(t.Context(), relaytest.Messages("c", 0, 1, 1), false); err != nil {
		t.Fatal(err)
	}
	log := &callLog{sent: map[string]int{}}
	reg := prometheus.NewRegistry()
	cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: log})
	cfg.BatchSize, cfg.MinBatchSize, cfg.Metrics = 10, 10, reg
	fl, err := outbox.NewFleet(coord.Std, &outbox.FleetConfig{Name: "fair", Workers: 1, Heartbeat: 100 * time.Millisecond, MemberTTL: time.Second, Relay: *cfg})
	if err != nil {
		t.Fatal(err)
	}
	list := func(names ...string) []outbox.FleetDatabase {
		var out []outbox.FleetDatabase
		for _, n := range names {
			h := dbs[n]
			out = append(out, outbox.FleetDatabase{Name: n, Open: func(context.Context) (outbox.FleetDriver, func(), error) {
				d, err := outbox.FleetDriverOf(h.DB.Std)
				return d, nil, err
			}})
		}
		return out
	}
	if err := fl.SetDatabases(list("a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	stop := relaytest.Go(t, "fleet", 30*time.Second, fl.Run)
	relaytest.WaitFor(t, 3*time.Minute, "both backlogs sent", func() bool { return log.count("a") == 300 && log.count("b") == 300 })

	log.mu.Lock()
	calls := slices.Clone(log.calls)
	log.mu.Unlock()
	na, nb := 0, 0
	for i, c := range calls {
		switch c {
		case "a":
			na++
		case "b":
			nb++
		case "c":
			if i > 10 {
				t.Errorf("c's message went out in call %d, after %d of a's and %d of b's", i, na, nb)
			}
		}
		if na < 30 && nb < 30 && (na-nb > 3 || nb-na > 3) {
			t.Fatalf("after %d calls a had %d and b %d: not in turns (%v)", i+1, na, nb, calls[:i+1])
		}
	}
	if got := fl.Serving(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Serving = %v", got)
	}
	series := func() string {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				b.WriteString(mf.GetName())
				for _, l := range m.GetLabel() {
					fmt.Fprintf(&b, " %s=%q", l.GetName(), l.GetValue())
				}
				b.WriteString("\n")
			}
		}
		return b.String()
	}
	if s := series(); !strings.Contains(s, ` database="b"`) || strings.Count(s, ` database=`) != strings.Count(s, "\n") {
		t.Fatalf("series without a database label, or none of b:\n%s", s)
	}
	if err := fl.SetDatabases(list("a", "c")); err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 10*time.Second, "b no longer served and its series gone", func() bool {
		return !slices.Contains(fl.Serving(), "b") && !strings.Contains(series(), ` database="b"`)
	})
	if s := series(); !strings.Contains(s, ` database="a"`) {
		t.Errorf("a's series went with b's:\n%s", s)
	}
	if err := fl.SetDatabases(append(list("a"), list("a")...)); err == nil {
		t.Error("SetDatabases took the same name twice")
	}
	stop()
}
