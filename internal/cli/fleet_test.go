package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/fleet"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// TestRelayFleetMetricsAndStatus: one relay over two databases given as
// repeated --db (one URL with a password) delivers both databases'
// messages, labels its metrics with each database's name and never with
// the password; 'outbox status --db-file' shows both in one document,
// with the relay holding each.
func TestRelayFleetMetricsAndStatus(t *testing.T) {
	lite := testdb.New(t, store.SQLite)
	pg := testdb.New(t, store.Postgres)
	const pw = "hunter2-fleet"
	pgURL := strings.Replace(pg.URL, "postgres://postgres@", "postgres://postgres:"+pw+"@", 1)
	vars := map[string]string{}
	for _, u := range []string{lite.URL, pgURL} {
		enqueueOK(t, vars, "--db", u, "--topic", "fleet.one", "--payload", `{"n":1}`)
	}
	addr, stderr, stop := startListening(t, "metrics", vars, "relay", "--db", lite.URL, "--db", pgURL, "--to", "stdout://",
		"--id", "fleet-r1", "--metrics", "127.0.0.1:0", "--max-poll", "100ms")
	names := []string{fleet.DefaultName(lite.URL), fleet.DefaultName(pgURL)}
	var metrics string
	waitFor(t, "both databases' sends in the metrics", func() bool {
		_, metrics = get(t, "http://"+addr+"/metrics", "")
		for _, n := range names {
			if !strings.Contains(metrics, fmt.Sprintf(`outbox_published_total{database=%q,result="sent",route="*",topic="fleet.one"} 1`, n)) {
				return false
			}
		}
		return true
	})
	if strings.Contains(metrics, pw) || strings.Contains(stderr.String(), pw) {
		t.Errorf("the password shows in the metrics or the log")
	}
	for _, n := range names {
		if !strings.Contains(stderr.String(), "database="+n) {
			t.Errorf("the log never names database %s:\n%s", n, stderr)
		}
	}

	list := writeFile(t, "databases", "# two tenants\nlite "+lite.URL+"\npg "+pgURL+"  # the password stays here\n")
	var doc struct {
		Databases []struct {
			Database string
			Relays   []string
			Error    string
			Sent     int64
		}
		Total struct{ Sent int64 }
	}
	waitFor(t, "both databases held by the relay", func() bool {
		r := run(t, vars, "status", "--db-file", list, "--json").ok(t)
		r.decode(t, &doc)
		if strings.Contains(r.stdout, pw) {
			t.Fatalf("status shows the password:\n%s", r.stdout)
		}
		return len(doc.Databases) == 2 && !slices.ContainsFunc(doc.Databases, func(d struct {
			Database string
			Relays   []string
			Error    string
			Sent     int64
		}) bool {
			return !slices.Equal(d.Relays, []string{"fleet-r1"})
		})
	})
	if doc.Databases[0].Database != "lite" || doc.Databases[1].Database != "pg" || doc.Total.Sent != 2 {
		t.Errorf("status --db-file: %+v", doc)
	}
	table := run(t, vars, "status", "--db-file", list).ok(t).stdout
	if !regexp.MustCompile(`(?m)^lite +0 +1 +0 +0 .*fleet-r1`).MatchString(table) || !regexp.MustCompile(`(?m)^total +0 +2 `).MatchString(table) {
		t.Errorf("status table:\n%s", table)
	}
	if code := stop(); code != 0 {
		t.Errorf("relay exited %d\n%s", code, stderr)
	}

	broken := writeFile(t, "broken", "lite "+lite.URL+"\ndown postgres://postgres:"+pw+"@127.0.0.1:1/x?sslmode=disable\n")
	r := run(t, vars, "status", "--db-file", broken)
	if r.code != ExitFailure || !strings.Contains(r.stdout, "lite") || !strings.Contains(r.stderr, "1 of 2 databases could not be read") || strings.Contains(r.stdout+r.stderr, pw) {
		t.Errorf("status over a down database: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRelayFleetUsage: the fleet's flags refuse what cannot work, each
// with one line and exit 2.
func TestRelayFleetUsage(t *testing.T) {
	t.Parallel()
	vars := map[string]string{}
	a, b := "sqlite:///tmp/a.db", "sqlite:///tmp/b.db"
	list := writeFile(t, "list", "a "+a+"\nb "+b+"\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", a, "--db-file", list}, "either --db (repeated) or --db-file"},
		{[]string{"--db-file", list + ".missing"}, "--db-file: open"},
		{[]string{"--db-file", writeFile(t, "bad", "a b c\n")}, "line 1: want URL or NAME URL"},
		{[]string{"--db", a, "--db", a}, "listed twice"},
		{[]string{"--db", a, "--db", b, "--listen-db", "postgres://h/x"}, "--listen-db serves one database"},
		{[]string{"--db", a, "--db", b, "--db-max-conns", "-1"}, "must not be negative"},
	} {
		run(t, vars, append([]string{"relay", "--to", "stdout://"}, c.args...)...).failed(t, ExitUsage, c.want)
	}
	run(t, vars, "status", "--db-file", list, "--watch").failed(t, ExitUsage, "--db-file goes without")
}

// TestRelayFleetAdmin: a relay over a list serves each database's admin
// API and page under /db/NAME/, each listing the others for the page's
// selector; a database gone from the list is gone from the admin too.
func TestRelayFleetAdmin(t *testing.T) {
	a, b := testdb.New(t, store.SQLite), testdb.New(t, store.SQLite)
	vars := map[string]string{}
	enqueueOK(t, vars, "--db", a.URL, "--topic", "fleet.a", "--payload", `{}`, "--delay", "1h")
	for range 2 {
		enqueueOK(t, vars, "--db", b.URL, "--topic", "fleet.b", "--payload", `{}`, "--delay", "1h")
	}
	list := writeFile(t, "databases", "lite-a "+a.URL+"\nlite-b "+b.URL+"\n")
	addr, stderr, stop := startListening(t, "admin", vars, "relay", "--db-file", list, "--to", "stdout://", "--admin", "127.0.0.1:0")
	base := "http://" + addr
	var stats struct{ Pending int64 }
	for name, want := range map[string]int64{"lite-a": 1, "lite-b": 2} {
		code, body := get(t, base+"/db/"+name+"/api/v1/stats", "")
		if err := json.Unmarshal([]byte(body), &stats); code != 200 || err != nil || stats.Pending != want {
			t.Errorf("%s stats: %d %s, want %d pending", name, code, body, want)
		}
	}
	var dbs struct {
		Current   string
		Databases []string
	}
	code, body := get(t, base+"/db/lite-b/api/v1/databases", "")
	if err := json.Unmarshal([]byte(body), &dbs); code != 200 || err != nil || dbs.Current != "lite-b" || !slices.Equal(dbs.Databases, []string{"lite-a", "lite-b"}) {
		t.Errorf("databases: %d %s", code, body)
	}
	if code, body := get(t, base+"/db/lite-a/", ""); code != 200 || !strings.Contains(body, `id="database-pick"`) {
		t.Errorf("page: %d %.200s", code, body)
	}
	if code, _ := get(t, base+"/db/nope/api/v1/stats", ""); code != 404 {
		t.Errorf("an unlisted database: %d, want 404", code)
	}
	if code, body := get(t, base+"/metrics", ""); code != 200 || !strings.Contains(body, `database="lite-a"`) {
		t.Errorf("metrics: %d", code)
	}
	if err := os.WriteFile(list, []byte("lite-a "+a.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "lite-b gone from the admin", func() bool {
		code, _ := get(t, base+"/db/lite-b/api/v1/stats", "")
		return code == 404
	})
	if code := stop(); code != 0 {
		t.Errorf("relay exited %d\n%s", code, stderr)
	}
}
