package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/fleet"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testpg"
)

// Relay settings of the process tests: small batches bound what a killed
// relay leaves in flight.
const (
	testBatch   = 20
	testWorkers = 4 // outbox.DefaultWorkers: the in-flight bound is batch × workers per database
)

// tenant is one database of a fleet test, its producer's record and the
// destination's arrivals.
type tenant struct {
	name string
	h    *harness.Harness
	rec  chaos.Recorder

	mu        sync.Mutex
	committed map[string]time.Time // message id → when its commit returned
	arrived   map[string]time.Time // message id → first arrival
	seq       int
	halt      func() // stops the producer and waits for it
}

func (tn *tenant) topic() string { return "fleet." + tn.name }

// fleetTest is a fleet of relay processes over tenant databases, with a
// webhook receiver that records every arrival in its tenant's recorder.
type fleetTest struct {
	t     *testing.T
	name  string // the fleet's name, the test's own
	file  string // the database list
	coord string // the coordination database's URL
	hook  string

	mu      sync.Mutex
	tenants map[string]*tenant            // by topic
	procs   map[string]*relaytest.Process // the relays running, by member id
}

func newFleetTest(t *testing.T) *fleetTest {
	t.Helper()
	coord := testdb.New(t, store.Postgres)
	ft := &fleetTest{
		t: t, name: testdb.RandomName("fleet_"), file: filepath.Join(t.TempDir(), "databases"),
		coord: coord.URL, tenants: map[string]*tenant{}, procs: map[string]*relaytest.Process{},
	}
	srv := httptest.NewServer(http.HandlerFunc(ft.receive))
	t.Cleanup(srv.Close)
	ft.hook = srv.URL + "/hooks"
	return ft
}

// receive records one delivery.
func (ft *fleetTest) receive(w http.ResponseWriter, r *http.Request) {
	ft.mu.Lock()
	tn := ft.tenants[r.Header.Get("outbox-topic")]
	ft.mu.Unlock()
	if tn == nil {
		http.Error(w, "unknown topic", http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	tn.rec.Deliver(id, r.Header.Get("outbox-business-key"))
	tn.mu.Lock()
	if _, ok := tn.arrived[id]; !ok {
		tn.arrived[id] = time.Now()
	}
	tn.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// add makes a tenant named name over db.
func (ft *fleetTest) add(name string, c harness.Case, db *testdb.DB) *tenant {
	tn := &tenant{name: name, h: harness.Over(ft.t, c, db), committed: map[string]time.Time{}, arrived: map[string]time.Time{}}
	ft.mu.Lock()
	ft.tenants[tn.topic()] = tn
	ft.mu.Unlock()
	return tn
}

// addNew makes a tenant over a fresh database of dialect d.
func (ft *fleetTest) addNew(name string, d store.Dialect) *tenant {
	return ft.add(name, harness.Case{Name: string(d), Dialect: d}, testdb.New(ft.t, d))
}

// list writes the database list: one "NAME URL" line per tenant, replaced
// in one rename so a relay never reads half of it.
func (ft *fleetTest) list(tns []*tenant) {
	ft.t.Helper()
	var b strings.Builder
	b.WriteString("# fleet test databases\n")
	for _, tn := range tns {
		fmt.Fprintf(&b, "%s %s\n", tn.name, tn.h.DB.URL)
	}
	tmp := ft.file + ".new"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		ft.t.Fatal(err)
	}
	if err := os.Rename(tmp, ft.file); err != nil {
		ft.t.Fatal(err)
	}
}

// relay starts member id of the fleet over the list.
func (ft *fleetTest) relay(id string, extra ...string) *relaytest.Process {
	ft.t.Helper()
	args := []string{
		"--db-file", ft.file, "--fleet", ft.name, "--fleet-db", ft.coord, "--id", id, "--to", ft.hook,
		"--batch-size", fmt.Sprint(testBatch), "--lease-ttl", "1s", "--max-poll", "200ms",
		"--retry-base", "20ms", "--retry-cap", "200ms",
	}
	p := relaytest.StartRelayArgs(ft.t, append(args, extra...)...)
	ft.mu.Lock()
	ft.procs[id] = p
	ft.mu.Unlock()
	return p
}

// kill SIGKILLs member id.
func (ft *fleetTest) kill(id string) {
	ft.mu.Lock()
	p := ft.procs[id]
	delete(ft.procs, id)
	ft.mu.Unlock()
	p.Kill()
}

// running is the relays running, by member id.
func (ft *fleetTest) running() map[string]*relaytest.Process {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return maps.Clone(ft.procs)
}

// produce commits perTx messages over keys keys to tn every pause, in the
// background, recording each commit, until halt.
func (tn *tenant) produce(perTx, keys int, pause time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	tn.halt = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			tn.commit(perTx, keys)
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}()
}

// commit commits one transaction of n messages and records it.
func (tn *tenant) commit(n, keys int) {
	msgs := relaytest.Messages(tn.topic(), tn.seq, n, keys)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ids, err := tn.h.Enqueue(ctx, msgs, false)
	cancel()
	var ce *harness.CommitError
	switch {
	case err == nil:
		tn.seq += n
		ks := make([]string, n)
		for i, m := range msgs {
			ks[i] = m.Key
		}
		tn.rec.Commit(ids, ks)
		now := time.Now()
		tn.mu.Lock()
		for _, id := range ids {
			tn.committed[id] = now
		}
		tn.mu.Unlock()
	case errors.As(err, &ce):
		tn.rec.Uncertain(ids)
	default:
		tn.rec.RollBack(ids)
	}
}

// delivered reports whether every message committed to tn has arrived.
func (tn *tenant) delivered() bool {
	committed, distinct, _ := tn.rec.Counts()
	return distinct >= committed
}

// settle waits until every message committed to tns has arrived and
// none is pending: a message whose relay died after publishing it arrives
// before it is settled, by its next owner, which sends it again.
func settle(t *testing.T, within time.Duration, tns []*tenant) {
	t.Helper()
	relaytest.WaitFor(t, within, "every message delivered and settled", func() bool {
		return !slices.ContainsFunc(tns, func(tn *tenant) bool {
			return !tn.delivered() || tn.h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending'") > 0
		})
	})
}

// check judges tn's run: nothing lost, unexpected or falsely sent, per-key
// order kept, duplicates within maxDup, nothing left pending.
func (tn *tenant) check(t *testing.T, maxDup int) chaos.Report {
	t.Helper()
	rep := chaos.Check(tn.rec.History(tn.h.DB.Statuses(t)))
	if err := rep.Err(chaos.Bounds{MaxDuplicates: maxDup}); err != nil {
		t.Errorf("database %s: %v", tn.name, err)
	}
	return rep
}

// serving is the set of databases a relay process serves, from its log.
func serving(p *relaytest.Process) map[string]bool {
	out := map[string]bool{}
	for line := range strings.Lines(p.Log()) {
		name := logValue(line, "database")
		switch {
		case strings.Contains(line, `msg="fleet: serving database"`):
			out[name] = true
		case strings.Contains(line, `msg="fleet: stopped serving database"`):
			delete(out, name)
		}
	}
	return out
}

// logValue is the value of key=value in a text log line.
func logValue(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexAny(v, " \n"); j >= 0 {
		v = v[:j]
	}
	return strings.Trim(v, `"`)
}

// expect is what each member serves by rendezvous hashing of names over
// members.
func expect(members []string, tns []*tenant) map[string][]string {
	dbs := make([]fleet.Database, len(tns))
	for i, tn := range tns {
		dbs[i] = fleet.Database{Name: tn.name}
	}
	out := map[string][]string{}
	for _, m := range members {
		for _, db := range fleet.Assigned(m, members, dbs) {
			out[m] = append(out[m], db.Name)
		}
		sort.Strings(out[m])
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// split waits until each relay of relays (by member id) serves exactly
// what rendezvous hashing gives it over tns.
func split(t *testing.T, within time.Duration, relays map[string]*relaytest.Process, tns []*tenant) {
	t.Helper()
	members := make([]string, 0, len(relays))
	for id := range relays {
		members = append(members, id)
	}
	sort.Strings(members)
	want := expect(members, tns)
	relaytest.WaitFor(t, within, fmt.Sprintf("relays %v serving %v", members, want), func() bool {
		for id, p := range relays {
			if !slices.Equal(keys(serving(p)), want[id]) {
				return false
			}
		}
		return true
	})
}

// TestFleetSplitsDatabases: two relay processes given the same list of
// six databases (PostgreSQL and SQLite) split them as rendezvous hashing
// says, each serving only its own; the second killed, the first serves
// all six; every message of every database arrives, in key order, none
// lost or falsely sent.
func TestFleetSplitsDatabases(t *testing.T) {
	ft := newFleetTest(t)
	var tns []*tenant
	for i := range 6 {
		d := store.Postgres
		if i%2 == 1 {
			d = store.SQLite
		}
		tns = append(tns, ft.addNew(fmt.Sprintf("db%d", i+1), d))
	}
	ft.list(tns)
	r1 := ft.relay("r1")
	split(t, 30*time.Second, map[string]*relaytest.Process{"r1": r1}, tns)

	for _, tn := range tns {
		tn.produce(5, 4, 50*time.Millisecond)
		t.Cleanup(tn.halt)
	}
	r2 := ft.relay("r2")
	split(t, 30*time.Second, map[string]*relaytest.Process{"r1": r1, "r2": r2}, tns)
	time.Sleep(time.Second) // both relays publishing
	ft.kill("r2")
	split(t, 30*time.Second, map[string]*relaytest.Process{"r1": r1}, tns)
	time.Sleep(time.Second)
	for _, tn := range tns {
		tn.halt()
	}
	settle(t, 60*time.Second, tns)
	for _, tn := range tns {
		rep := tn.check(t, testBatch*testWorkers)
		t.Logf("database %s: %v", tn.name, rep)
		if rep.Committed == 0 {
			t.Errorf("database %s: nothing committed", tn.name)
		}
	}
	r1.Stop(t)
}

// TestFleetChurn: three relay processes over twelve PostgreSQL databases
// (one on a private server) and thirty SQLite files, producers on all;
// one relay SIGKILLed, one added, one database removed from the list and
// another added, the private server killed and started again, while
// messages flow. Per database: nothing lost, unexpected or falsely sent,
// per-key order kept (two relays publishing for one database at once
// would break it), duplicates within one relay's in-flight bound. A
// removed database is released: nothing more is sent from it and no relay
// holds its partitions. Each relay's connections to the shared server
// stay within its share (pg_stat_activity by application_name). The
// others' commit→arrival p99 with and without the killed server is
// logged (not asserted: the machine is shared).
func TestFleetChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a minute of relay processes")
	}
	ft := newFleetTest(t)
	// Twelve PostgreSQL databases: six on a private server whose
	// connections are counted, one alone on a private server that is
	// killed, five on the shared service.
	counted, priv := testpg.Start(t), testpg.Start(t)
	var tns []*tenant
	tns = append(tns, ft.add("private", harness.Case{Name: "private", Dialect: store.Postgres}, serverDB(t, priv, "private")))
	for i := range 6 {
		name := fmt.Sprintf("pgc%d", i)
		tns = append(tns, ft.add(name, harness.Case{Name: name, Dialect: store.Postgres}, serverDB(t, counted, name)))
	}
	for i := range 5 {
		tns = append(tns, ft.addNew(fmt.Sprintf("pg%d", i), store.Postgres))
	}
	for i := range 30 {
		tns = append(tns, ft.addNew(fmt.Sprintf("lite%02d", i), store.SQLite))
	}
	late := ft.addNew("late", store.SQLite)
	ft.list(tns)
	prefix := ft.name + "-"
	relays := map[string]*relaytest.Process{}
	for _, id := range []string{"r1", "r2", "r3"} {
		relays[prefix+id] = ft.relay(prefix+id, "--db-max-conns", "2")
	}
	split(t, 60*time.Second, relays, tns)

	for _, tn := range append(tns, late) {
		t.Cleanup(func() {
			if tn.halt != nil {
				tn.halt()
			}
		})
	}
	for _, tn := range tns {
		tn.produce(2, 4, 200*time.Millisecond)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	conns := ft.watchConnections(ctx, t, counted, 2)
	time.Sleep(3 * time.Second)

	killed := time.Now()
	ft.kill(prefix + "r3")
	delete(relays, prefix+"r3")
	split(t, 60*time.Second, relays, tns)
	t.Logf("a killed relay's databases served again after %s", time.Since(killed).Round(100*time.Millisecond))

	relays[prefix+"r4"] = ft.relay(prefix+"r4", "--db-max-conns", "2")
	split(t, 60*time.Second, relays, tns)

	// Removed: its producer stops first, its messages arrive, then it
	// leaves the list as another joins it.
	gone := tns[len(tns)-1]
	gone.halt()
	relaytest.WaitFor(t, 60*time.Second, "the database to remove drained", gone.delivered)
	tns = append(tns[:len(tns)-1], late)
	late.produce(2, 4, 200*time.Millisecond)
	ft.list(tns)
	split(t, 60*time.Second, relays, tns)
	if _, err := gone.h.Enqueue(context.Background(), relaytest.Messages(gone.topic(), 1_000_000, 5, 1), false); err != nil {
		t.Fatal(err)
	}

	// The private server killed while the others flow, then back.
	others := tns[1:]
	before := time.Now()
	time.Sleep(4 * time.Second)
	down := time.Now()
	priv.Kill(t)
	time.Sleep(4 * time.Second)
	up := time.Now()
	if n := arrivedBetween(others, down, up); n == 0 {
		t.Errorf("no message of the other databases arrived while the private server was down")
	}
	priv.Ctl(t, "start")
	time.Sleep(2 * time.Second)

	for _, tn := range tns {
		tn.halt()
	}
	settle(t, 90*time.Second, tns)
	stop()
	<-conns

	for _, d := range []store.Dialect{store.Postgres, store.SQLite} {
		t.Logf("commit→arrival of the other databases, every server up: %s; the private one down: %s",
			latency(others, d, before, down), latency(others, d, down, up))
	}
	var total chaos.Report
	for _, tn := range append(tns, gone) {
		rep := tn.check(t, testBatch*testWorkers)
		total.Committed += rep.Committed
		total.Duplicates += rep.Duplicates
		if rep.Committed == 0 {
			t.Errorf("database %s: nothing committed", tn.name)
		}
	}
	t.Logf("%d messages over %d databases, %d duplicates", total.Committed, len(tns)+1, total.Duplicates)
	st := gone.h.DB.Statuses(t)
	pending := 0
	for _, s := range st {
		if s == chaos.StatusPending {
			pending++
		}
	}
	if pending != 5 {
		t.Errorf("the removed database has %d pending messages, want the 5 committed after it left the list", pending)
	}
	if h, err := fleet.Holders(context.Background(), gone.h.DB.Store().DB(), gone.h.DB.Dialect); err != nil || len(h) != 0 {
		t.Errorf("the removed database's partitions are held by %v (%v)", h, err)
	}
	for _, p := range relays {
		p.Stop(t)
	}
}

// watchConnections samples, every second until ctx ends, how many
// connections each running relay holds on srv (pg_stat_activity by
// application_name), and fails the test when a relay holds more than its
// share allows twice in a row: maxConns and the LISTEN connection for
// each of srv's databases it serves. The channel closes when it stopped,
// after logging the most each relay held.
func (ft *fleetTest) watchConnections(ctx context.Context, t *testing.T, srv *testpg.Server, maxConns int) <-chan struct{} {
	done := make(chan struct{})
	on := map[string]bool{}
	ft.mu.Lock()
	for _, tn := range ft.tenants {
		if strings.Contains(tn.h.DB.URL, srv.Addr()) {
			on[tn.name] = true
		}
	}
	ft.mu.Unlock()
	admin := testdb.PostgresAt(t, srv.URL())
	go func() {
		defer close(done)
		most, over := map[string]int{}, map[string]int{}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				t.Logf("most connections held on a server of %d databases per relay: %v", len(on), most)
				return
			case <-tick.C:
			}
			procs := ft.running()
			share := map[string]int{}
			count := func() {
				for id, p := range procs {
					n := 0
					for name := range serving(p) {
						if on[name] {
							n++
						}
					}
					share[id] = max(share[id], n)
				}
			}
			count()
			held := map[string]int{}
			rows, err := admin.Pool.Query(ctx, `SELECT application_name, count(*) FROM pg_stat_activity WHERE application_name LIKE $1 GROUP BY 1`, "outbox relay "+ft.name+"-%")
			if err != nil {
				continue
			}
			for rows.Next() {
				var app string
				var n int
				if rows.Scan(&app, &n) == nil {
					held[strings.TrimPrefix(app, "outbox relay ")] = n
				}
			}
			rows.Close()
			count() // a database moving in between counts for its new owner too
			for id := range procs {
				bound := share[id] * (maxConns + 1)
				most[id] = max(most[id], held[id])
				if held[id] <= bound {
					over[id] = 0
					continue
				}
				if over[id]++; over[id] == 2 {
					t.Errorf("relay %s holds %d connections, more than its %d databases there allow (%d)", id, held[id], share[id], bound)
				}
			}
		}
	}()
	return done
}

// serverDB creates database name on srv, migrated.
func serverDB(t *testing.T, srv *testpg.Server, name string) *testdb.DB {
	t.Helper()
	srv.SQL(t, "CREATE DATABASE "+name)
	db := testdb.PostgresAt(t, testdb.WithDatabase(srv.URL(), name))
	testdb.Migrate(t, db)
	return db
}

// arrivedBetween counts the messages of tns committed and first arrived
// between from and to.
func arrivedBetween(tns []*tenant, from, to time.Time) int {
	n := 0
	for _, tn := range tns {
		tn.mu.Lock()
		for id, c := range tn.committed {
			if a, ok := tn.arrived[id]; ok && !c.Before(from) && a.Before(to) {
				n++
			}
		}
		tn.mu.Unlock()
	}
	return n
}

// latency is the p50 and p99 of commit→first arrival of the messages of
// tns of dialect d committed between from and to, for the log.
func latency(tns []*tenant, d store.Dialect, from, to time.Time) string {
	var lat []time.Duration
	for _, tn := range tns {
		if tn.h.DB.Dialect != d {
			continue
		}
		tn.mu.Lock()
		for id, c := range tn.committed {
			if a, ok := tn.arrived[id]; ok && !c.Before(from) && c.Before(to) {
				lat = append(lat, a.Sub(c))
			}
		}
		tn.mu.Unlock()
	}
	if len(lat) == 0 {
		return "no messages"
	}
	slices.Sort(lat)
	return fmt.Sprintf("%s p50 %s p99 %s (%d messages)", d, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), len(lat))
}
