package cli

import (
	"fmt"
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
		{[]string{"--db", a, "--db", b, "--admin", ":0"}, "--admin serves one database"},
		{[]string{"--db", a, "--db", b, "--listen-db", "postgres://h/x"}, "--listen-db serves one database"},
		{[]string{"--db", a, "--db", b, "--db-max-conns", "-1"}, "must not be negative"},
	} {
		run(t, vars, append([]string{"relay", "--to", "stdout://"}, c.args...)...).failed(t, ExitUsage, c.want)
	}
	run(t, vars, "status", "--db-file", list, "--watch").failed(t, ExitUsage, "--db-file goes without")
}
