package fleet_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/fleet"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestParseList(t *testing.T) {
	got, err := fleet.ParseList(strings.NewReader(`
# tenants
acme   postgres://relay:s3cret@db1:5432/acme?sslmode=disable
globex mysql://root@db2:3306/globex   # moved in March
sqlite:///var/lib/outbox/initech.db
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []fleet.Database{
		{Name: "acme", URL: "postgres://relay:s3cret@db1:5432/acme?sslmode=disable"},
		{Name: "globex", URL: "mysql://root@db2:3306/globex"},
		{Name: "sqlite:///var/lib/outbox/initech.db", URL: "sqlite:///var/lib/outbox/initech.db"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ParseList = %+v, want %+v", got, want)
	}
	for _, c := range []struct{ in, want string }{
		{"a b c", "line 1: want URL or NAME URL, got 3 fields"},
		{"\n\n-bad postgres://h/db", "line 3: name \"-bad\""},
		{"acme user:hunter2@db1/acme", "line 1: "},
		{"a postgres://h/1\na postgres://h/2", `database "a" is listed twice`},
	} {
		_, err := fleet.ParseList(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseList(%q) = %v, want an error with %q", c.in, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseList(%q) shows the password: %v", c.in, err)
		}
	}
	dbs, err := fleet.FromURLs([]string{"postgres://u:pw@h:5432/a?sslmode=disable", "sqlite:///x.db"})
	if err != nil || dbs[0].Name != "postgres://h:5432/a" {
		t.Fatalf("FromURLs = %+v, %v; want the first named postgres://h:5432/a", dbs, err)
	}
	dbs, err = fleet.FromURLs([]string{"postgres://u:pw@h/a?search_path=t1&sslmode=disable", "postgres://u:pw@h/a?sslmode=disable&search_path=t2"})
	if err != nil || dbs[0].Name != "postgres://h/a?search_path=t1" || dbs[1].Name != "postgres://h/a?search_path=t2" {
		t.Fatalf("FromURLs over two schemas = %+v, %v; want each named with its search_path", dbs, err)
	}
	if _, err := fleet.FromURLs([]string{"sqlite:///x.db", "sqlite:///x.db"}); err == nil {
		t.Error("FromURLs took the same database twice")
	}
}

func names(n int) []fleet.Database {
	dbs := make([]fleet.Database, n)
	for i := range dbs {
		dbs[i] = fleet.Database{Name: fmt.Sprintf("tenant-%03d", i), URL: fmt.Sprintf("sqlite:///t/%d.db", i)}
	}
	return dbs
}

// TestRendezvous: the split is even enough, and a member leaving or
// joining moves only the databases that must move.
func TestRendezvous(t *testing.T) {
	dbs := names(600)
	three := []string{"relay-a", "relay-b", "relay-c"}
	owner := map[string]string{}
	count := map[string]int{}
	for _, db := range dbs {
		o := fleet.Owner(db.Name, three)
		owner[db.Name] = o
		count[o]++
	}
	for _, m := range three {
		if count[m] < 120 || count[m] > 280 {
			t.Errorf("%s owns %d of 600 databases among 3 members", m, count[m])
		}
	}
	two := []string{"relay-a", "relay-c"}
	four := append(slices.Clone(three), "relay-d")
	for _, db := range dbs {
		if o := fleet.Owner(db.Name, two); owner[db.Name] != "relay-b" && o != owner[db.Name] {
			t.Errorf("%s moved from %s to %s when relay-b left", db.Name, owner[db.Name], o)
		}
		if o := fleet.Owner(db.Name, four); o != "relay-d" && o != owner[db.Name] {
			t.Errorf("%s moved from %s to %s when relay-d joined", db.Name, owner[db.Name], o)
		}
	}
	var union []fleet.Database
	for _, m := range three {
		union = append(union, fleet.Assigned(m, three, dbs)...)
	}
	if len(union) != len(dbs) {
		t.Errorf("the members' shares add up to %d databases, want %d", len(union), len(dbs))
	}
	if got := fleet.Assigned("relay-z", three, dbs); len(got) != 0 {
		t.Errorf("a member missing from the membership is assigned %d databases", len(got))
	}
}

// TestMembership: members appear when they beat, disappear after the TTL
// without beats, and at once when they leave — on every dialect.
func TestMembership(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			db := testdb.New(t, d)
			ctx := context.Background()
			// TTLs of a few seconds: a loaded machine may take a second
			// between a beat and the read after it.
			a := member(t, db, "a", 3*time.Second)
			b := member(t, db, "b", 3*time.Second)
			for _, m := range []*fleet.Membership{a, b} {
				if err := m.Beat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if live := liveOf(t, a); !slices.Equal(live, []string{"a", "b"}) {
				t.Fatalf("live = %v, want [a b]", live)
			}
			other, err := fleet.NewMembership(db.Store().DB(), db.Dialect, "other", "z", 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := other.Beat(ctx); err != nil {
				t.Fatal(err)
			}
			if live := liveOf(t, other); !slices.Equal(live, []string{"z"}) {
				t.Fatalf("another fleet's members = %v, want its own z", live)
			}
			if live := liveOf(t, a); !slices.Equal(live, []string{"a", "b"}) {
				t.Fatalf("live = %v after another fleet's member beat, want [a b]", live)
			}
			relaytest.WaitFor(t, 20*time.Second, "b gone after its TTL without beats", func() bool {
				if err := a.Beat(ctx); err != nil {
					t.Fatal(err)
				}
				return slices.Equal(liveOf(t, a), []string{"a"})
			})
			if err := a.Leave(ctx); err != nil {
				t.Fatal(err)
			}
			if live := liveOf(t, b); len(live) != 0 {
				t.Fatalf("live after a left = %v, want none", live)
			}
		})
	}
}

func member(t *testing.T, db *testdb.DB, id string, ttl time.Duration) *fleet.Membership {
	t.Helper()
	m, err := fleet.NewMembership(db.Store().DB(), db.Dialect, "tenants", id, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func liveOf(t *testing.T, m *fleet.Membership) []string {
	t.Helper()
	live, err := m.Live(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return live
}

// tracker records which members serve which database at every moment.
type tracker struct {
	mu      sync.Mutex
	serving map[string]map[string]bool
}

func (tr *tracker) serve(member string) func(ctx context.Context, db fleet.Database) error {
	return func(ctx context.Context, db fleet.Database) error {
		tr.mu.Lock()
		if tr.serving[db.Name] == nil {
			tr.serving[db.Name] = map[string]bool{}
		}
		tr.serving[db.Name][member] = true
		tr.mu.Unlock()
		<-ctx.Done()
		tr.mu.Lock()
		delete(tr.serving[db.Name], member)
		tr.mu.Unlock()
		return nil
	}
}

// settled reports whether every database of dbs is served by exactly one
// member and nothing else is served.
func (tr *tracker) settled(dbs []fleet.Database) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	want := map[string]bool{}
	for _, db := range dbs {
		want[db.Name] = true
		if len(tr.serving[db.Name]) != 1 {
			return false
		}
	}
	for name, ms := range tr.serving {
		if !want[name] && len(ms) > 0 {
			return false
		}
	}
	return true
}

// TestSupervisorsShareTheList: three members split twelve databases so
// that each is served by exactly one; a member that stops beating (as a
// killed process does) loses its databases to the others after the TTL; a
// member that stops cleanly hands them over at once; a database added to
// or removed from the list is started or stopped.
func TestSupervisorsShareTheList(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	tr := &tracker{serving: map[string]map[string]bool{}}
	dbs := names(12)
	ghost := member(t, db, "ghost", 2*time.Second)
	if err := ghost.Beat(context.Background()); err != nil { // a member that dies at once
		t.Fatal(err)
	}
	sups := map[string]*fleet.Supervisor{}
	stops := map[string]func(){}
	for _, id := range []string{"a", "b", "c"} {
		s := fleet.NewSupervisor(member(t, db, id, 2*time.Second), fleet.Config{Heartbeat: 200 * time.Millisecond, Serve: tr.serve(id), Logger: relaytest.Logger()})
		s.SetList(dbs)
		sups[id] = s
		stops[id] = relaytest.Go(t, "supervisor "+id, 30*time.Second, s.Run)
	}
	relaytest.WaitFor(t, 30*time.Second, "every database served once, the dead member's too", func() bool { return tr.settled(dbs) })

	stops["c"]()
	relaytest.WaitFor(t, 30*time.Second, "c's databases taken over after it stopped", func() bool { return tr.settled(dbs) })
	if s := sups["c"].Serving(); len(s) != 0 {
		t.Fatalf("a stopped supervisor still serves %v", s)
	}
	list := append(slices.Clone(dbs[1:]), fleet.Database{Name: "tenant-new", URL: "sqlite:///t/new.db"})
	for _, id := range []string{"a", "b"} {
		sups[id].SetList(list)
	}
	relaytest.WaitFor(t, 30*time.Second, "the new list served", func() bool { return tr.settled(list) })
	if n := len(sups["a"].Serving()) + len(sups["b"].Serving()); n != len(list) {
		t.Fatalf("a and b serve %d databases, want %d", n, len(list))
	}
}
