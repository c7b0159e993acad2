package fleet_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/txoutbox/outbox/internal/harness"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
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
	tenants map[string]*tenant // by topic
}

func newFleetTest(t *testing.T) *fleetTest {
	t.Helper()
	coord := testdb.New(t, store.Postgres)
	ft := &fleetTest{
		t: t, name: testdb.RandomName("fleet_"), file: filepath.Join(t.TempDir(), "databases"),
		coord: coord.URL, tenants: map[string]*tenant{},
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
	return relaytest.StartRelayArgs(ft.t, append(args, extra...)...)
}

// produce commits perTx messages over keys keys to tn every pause until
// ctx ends, recording each commit; the channel closes when it stopped.
func (tn *tenant) produce(ctx context.Context, perTx, keys int, pause time.Duration) <-chan struct{} {
	done := make(chan struct{})
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
	return done
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

// check judges tn's run: nothing lost, unexpected or falsely sent, per-key
// order kept, duplicates within maxDup, nothing left pending.
func (tn *tenant) check(t *testing.T, maxDup int) chaos.Report {
	t.Helper()
	rep := chaos.Check(tn.rec.History(tableStatus(t, tn.h.DB)))
	if err := rep.Err(chaos.Bounds{MaxDuplicates: maxDup}); err != nil {
		t.Errorf("database %s: %v", tn.name, err)
	}
	return rep
}

// tableStatus is message id → status for every row of db's outbox.
func tableStatus(t *testing.T, db *testdb.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	q := "SELECT message_id, status FROM outbox_messages"
	if db.Dialect == store.Postgres {
		q = "SELECT message_id::text, status FROM outbox_messages"
	}
	rows, err := db.SQL.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
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

	ctx, stop := context.WithCancel(context.Background())
	var producers []<-chan struct{}
	for _, tn := range tns {
		producers = append(producers, tn.produce(ctx, 5, 4, 50*time.Millisecond))
	}
	r2 := ft.relay("r2")
	split(t, 30*time.Second, map[string]*relaytest.Process{"r1": r1, "r2": r2}, tns)
	time.Sleep(time.Second) // both relays publishing
	r2.Kill()
	split(t, 30*time.Second, map[string]*relaytest.Process{"r1": r1}, tns)
	time.Sleep(time.Second)
	stop()
	for _, done := range producers {
		<-done
	}
	relaytest.WaitFor(t, 60*time.Second, "every message delivered", func() bool {
		return !slices.ContainsFunc(tns, func(tn *tenant) bool { return !tn.delivered() })
	})
	for _, tn := range tns {
		rep := tn.check(t, testBatch*testWorkers)
		t.Logf("database %s: %v", tn.name, rep)
		if rep.Committed == 0 {
			t.Errorf("database %s: nothing committed", tn.name)
		}
	}
	r1.Stop(t)
	if n := r1.Logged("level=ERROR"); n > 0 {
		t.Errorf("relay r1 logged %d errors", n)
	}
}
