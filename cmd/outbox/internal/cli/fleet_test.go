package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/fleet"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testmariadb"
)

// TestRelayFleetMetricsAndStatus: one relay over two databases given as
// repeated --db (one URL with a password) delivers both databases'
// messages, labels its metrics with each database's name and never with
// the password; 'outbox status --db-file' shows both in one document,
// with the relay holding each, and adds up their expired messages.
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
		if !strings.Contains(stderr.String(), "database="+n) && !strings.Contains(stderr.String(), "database="+strconv.Quote(n)) {
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
	// An expired message counts in its database and in the total.
	enqueueOK(t, vars, "--db", pgURL, "--topic", "fleet.late", "--payload", `{"n":2}`)
	pg.Exec(t, "UPDATE outbox_messages SET status = 'expired' WHERE topic = 'fleet.late'")
	var expired struct{ Total struct{ Sent, Expired int64 } }
	run(t, vars, "status", "--db-file", list, "--json").ok(t).decode(t, &expired)
	if expired.Total.Sent != 2 || expired.Total.Expired != 1 {
		t.Errorf("status --db-file --json total: %+v, want 2 sent, 1 expired", expired.Total)
	}
	if table := run(t, vars, "status", "--db-file", list).ok(t).stdout; !regexp.MustCompile(`(?m)^total +0 +2 +0 +0 +1 `).MatchString(table) {
		t.Errorf("status table with an expired message:\n%s", table)
	}

	broken := writeFile(t, "broken", "lite "+lite.URL+"\ndown postgres://postgres:"+pw+"@127.0.0.1:1/x?sslmode=disable\n")
	r := run(t, vars, "status", "--db-file", broken)
	if r.code != ExitFailure || !strings.Contains(r.stdout, "lite") || !strings.Contains(r.stderr, "1 of 2 databases could not be read") || strings.Contains(r.stdout+r.stderr, pw) {
		t.Errorf("status over a down database: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRelayFleetSchemasShareOneListen: a relay serving three schemas of
// one PostgreSQL database (given as URLs, named by their search_path)
// holds one LISTEN connection for all of them, and delivers what each
// schema's producers commit.
func TestRelayFleetSchemasShareOneListen(t *testing.T) {
	vars := map[string]string{}
	var urls, names []string
	for range 3 {
		db := testdb.New(t, store.Postgres)
		urls = append(urls, db.URL)
		names = append(names, fleet.DefaultName(db.URL))
	}
	member := testdb.RandomName("share-")
	args := []string{"relay", "--to", "stdout://", "--id", member, "--metrics", "127.0.0.1:0"}
	for _, u := range urls {
		args = append(args, "--db", u)
	}
	addr, stderr, stop := startListening(t, "metrics", vars, args...)
	admin := testdb.PostgresAt(t, testdb.PostgresURL)
	listens := func() int {
		return admin.Count(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'", appName(member))
	}
	for round := 1; round <= 2; round++ {
		for _, u := range urls {
			enqueueOK(t, vars, "--db", u, "--topic", "fleet.share", "--payload", `{"n":1}`)
		}
		waitFor(t, fmt.Sprintf("round %d delivered in every schema", round), func() bool {
			_, metrics := get(t, "http://"+addr+"/metrics", "")
			for _, n := range names {
				if !strings.Contains(metrics, fmt.Sprintf(`outbox_published_total{database=%q,result="sent",route="*",topic="fleet.share"} %d`, n, round)) {
					return false
				}
			}
			return true
		})
		waitFor(t, "the relay listening", func() bool { return listens() > 0 })
		if n := listens(); n != 1 {
			t.Fatalf("round %d: the relay holds %d LISTEN connections for three schemas of one database, want 1", round, n)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("relay exited %d\n%s", code, stderr)
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
		{[]string{"--db", "tenant1 " + a, "--db", b}, `relay: --db: bad database URL "tenant1 sqlite:///tmp/a.db"`},
		{[]string{"--db", a, "--db", b, "--listen-db", "postgres://h/x"}, "--listen-db serves one database"},
		{[]string{"--db", a, "--db", b, "--db-max-conns", "-1"}, "must not be negative"},
		{[]string{"--db", a, "--db", b, "--binlog", "mysql://u:hunter2@h/x"}, `--binlog "mysql://u:xxxxx@h/x": with several databases, auto`},
		{[]string{"--db", a, "--binlog", "sometimes"}, `--binlog "sometimes": want auto, off or a mysql:// URL`},
		{[]string{"--db", a, "--binlog", "mysql://u@h/x"}, "--binlog needs a MySQL or MariaDB database, not sqlite"},
	} {
		run(t, vars, append([]string{"relay", "--to", "stdout://"}, c.args...)...).failed(t, ExitUsage, c.want)
	}
	run(t, vars, "status", "--db-file", list, "--watch").failed(t, ExitUsage, "--db-file goes without")
}

// TestRelayFleetFollowsEachBinaryLog: a relay over two databases of a
// MariaDB server that writes a binary log follows it for each (status
// shows "binlog" as the relay's wake-up in both) and delivers what a
// plain-SQL producer commits to either.
func TestRelayFleetFollowsEachBinaryLog(t *testing.T) {
	my := testmariadb.Start(t, "--log-bin=binlog", "--server-id=7")
	admin := testdb.MySQLAt(t, my.URL)
	vars := map[string]string{}
	var urls []string
	for _, name := range []string{"tenant_a", "tenant_b"} {
		if _, err := admin.SQL.Exec("CREATE DATABASE " + name); err != nil {
			t.Fatal(err)
		}
		u := strings.TrimSuffix(my.URL, "/test") + "/" + name
		run(t, vars, "migrate", "--db", u).ok(t)
		urls = append(urls, u)
	}
	_, stderr, stop := startListening(t, "metrics", vars, "relay", "--db", urls[0], "--db", urls[1], "--to", "stdout://",
		"--id", "fleet-binlog", "--metrics", "127.0.0.1:0", "--min-poll", "10m", "--max-poll", "10m")
	for _, u := range urls {
		waitFor(t, "the relay following "+u+"'s binary log", func() bool {
			var st struct {
				Relays []struct{ Wake string }
			}
			run(t, vars, "status", "--db", u, "--json").ok(t).decode(t, &st)
			return len(st.Relays) == 1 && st.Relays[0].Wake == "binlog"
		})
		db := testdb.MySQLAt(t, u)
		db.Exec(t, "INSERT INTO outbox_messages (topic, payload) VALUES ('fleet.binlog', '{}')")
		waitFor(t, "the plain-SQL row of "+u+" sent", func() bool {
			return db.Count(t, "SELECT COUNT(*) FROM outbox_messages WHERE status = 'sent'") == 1
		})
	}
	if code := stop(); code != 0 {
		t.Errorf("relay exited %d\n%s", code, stderr)
	}
}

// TestRelayFleetAdmin: a relay over a list serves each database's admin
// API and page under /db/NAME/, each listing the others for the page's
// selector; a database gone from the list is gone from the admin too.
func TestRelayFleetAdmin(t *testing.T) {
	f := startFleetAdmin(t, "lite", 2)
	a, list, stderr, stop := f.a, f.list, f.stderr, f.stop
	base := "http://" + f.addr
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
	// A database's series appear once its relay has started, which may
	// come after its admin API answers.
	waitFor(t, `metrics labelled database="lite-a"`, func() bool {
		code, body := get(t, base+"/metrics", "")
		return code == 200 && strings.Contains(body, `database="lite-a"`)
	})
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

// TestRelayFleetConfigKeys: the fleet's settings come from the config
// file's relay keys when neither a flag nor a variable gives them; a relay
// over relay.databases delivers every listed database's messages under
// the names the entries give; bad values are one-line usage errors naming
// the key.
func TestRelayFleetConfigKeys(t *testing.T) {
	a, b := testdb.New(t, store.SQLite), testdb.New(t, store.SQLite)
	vars := map[string]string{}
	for _, u := range []string{a.URL, b.URL} {
		enqueueOK(t, vars, "--db", u, "--topic", "fleet.cfg", "--payload", `{}`)
	}
	conf := writeFile(t, "relay.yaml", "to: stdout://\nrelay:\n  max_poll: 100ms\n  fleet: cfg-fleet\n  fleet_workers: 6\n"+
		"  db_max_conns: 3\n  db_idle_close: 1m\n  databases:\n    - cfg-a "+a.URL+"\n    - cfg-b "+b.URL+"\n")

	resolve := func(t *testing.T, vars map[string]string, src string, args ...string) (*relayFlags, error) {
		t.Helper()
		cfg, err := parseConfig("relay.yaml", []byte(src))
		if err != nil {
			return nil, err
		}
		fs := flag.NewFlagSet("relay", flag.ContinueOnError)
		f := newRelayFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		r := &resolver{e: testEnv(t.Context(), vars, nil, io.Discard, io.Discard), set: setFlags(fs), cfg: cfg}
		return f, f.fleet.fromConfig(r)
	}
	src, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	f, err := resolve(t, nil, string(src))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%v %s %d %d %s", f.fleet.list, f.fleet.name, f.fleet.workers, f.fleet.maxConns, f.fleet.idleClose)
	if want := fmt.Sprintf("[{cfg-a %s} {cfg-b %s}] cfg-fleet 6 3 1m0s", a.URL, b.URL); got != want || !f.fleet.active(&f.db) {
		t.Errorf("from the file: %s, want %s", got, want)
	}
	// Flags win over the file, variables too; --db gives the databases.
	f, err = resolve(t, map[string]string{"OUTBOX_FLEET": "env-fleet"}, string(src),
		"--db", a.URL, "--fleet-workers", "9", "--db-max-conns", "1", "--db-idle-close", "5s", "--fleet-db", b.URL)
	if err != nil {
		t.Fatal(err)
	}
	got = fmt.Sprintf("%v %s %d %d %s %s", f.fleet.list, f.fleet.name, f.fleet.workers, f.fleet.maxConns, f.fleet.idleClose, f.fleet.coordURL)
	if want := "[] env-fleet 9 1 5s " + b.URL; got != want || f.fleet.active(&f.db) {
		t.Errorf("flags over the file: %s, want %s", got, want)
	}
	f, err = resolve(t, nil, "relay:\n  db_file: /etc/outbox/dbs\n  fleet_db: "+a.URL+"\n")
	if err != nil || f.fleet.file != "/etc/outbox/dbs" || f.fleet.coordURL != a.URL || f.fleet.fileFrom != "config relay.yaml: relay.db_file" {
		t.Errorf("db_file: %+v, %v", f.fleet, err)
	}

	for _, c := range []struct{ src, want string }{
		{"relay:\n  fleet_workers: many\n", `config relay.yaml: relay.fleet_workers: "many" is not a whole number`},
		{"relay:\n  db_max_conns: -2\n", `config relay.yaml: relay.db_max_conns: "-2" must not be negative`},
		{"relay:\n  db_idle_close: soon\n", `config relay.yaml: relay.db_idle_close: "soon" is not a duration`},
		{"relay:\n  databases: []\n", "config relay.yaml: relay.databases: lists no database"},
		{"relay:\n  databases: [a b c]\n", "config relay.yaml: relay.databases[0]: want URL or NAME URL, got 3 fields"},
		{"relay:\n  databases: [db.example]\n", "config relay.yaml: relay.databases[0]: db.example is not a database URL"},
		{"relay:\n  databases: [x " + a.URL + ", x " + b.URL + "]\n", `config relay.yaml: relay.databases[1]: database "x" is listed twice`},
		{"relay:\n  databases: [" + a.URL + "]\n  db_file: /x\n", "config relay.yaml: relay: give either relay.databases or relay.db_file, not both"},
		{"relay:\n  databases: " + a.URL + "\n", "relay.databases: want a list (line 2)"},
	} {
		_, err := resolve(t, nil, c.src)
		if err == nil || exitStatus(err) != ExitUsage || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want a one-line usage error with %q", c.src, err, c.want)
		}
	}
	run(t, vars, "relay", "--config", writeFile(t, "nofile.yaml", "to: stdout://\nrelay:\n  db_file: /nonexistent/dbs\n")).
		failed(t, ExitUsage, "config ", "relay.db_file: open /nonexistent/dbs")

	addr, stderr, stop := startListening(t, "metrics", vars, "relay", "--config", conf, "--id", "cfg-r1", "--metrics", "127.0.0.1:0")
	waitFor(t, "both databases' sends under their configured names", func() bool {
		_, metrics := get(t, "http://"+addr+"/metrics", "")
		for _, n := range []string{"cfg-a", "cfg-b"} {
			if !strings.Contains(metrics, fmt.Sprintf(`outbox_published_total{database=%q,result="sent",route="*",topic="fleet.cfg"} 1`, n)) {
				return false
			}
		}
		return true
	})
	if code := stop(); code != 0 || !strings.Contains(stderr.String(), "fleet=cfg-fleet") || !strings.Contains(stderr.String(), "databases=2") {
		t.Errorf("relay exited %d; want its fleet line to name cfg-fleet and 2 databases\n%s", code, stderr)
	}
}

// TestRelayFleetAdminHistory: the admin of a relay over a list samples
// the history of each database it serves, so /db/NAME/api/v1/stats/history
// has that database's own counts; the sampler stops when the relay stops
// serving the database.
func TestRelayFleetAdminHistory(t *testing.T) {
	f := startFleetAdmin(t, "hist", 3)
	stderr, stop := f.stderr, f.stop
	base := "http://" + f.addr
	for name, want := range map[string]int64{"hist-a": 1, "hist-b": 3} {
		var hist struct {
			Samples []struct{ Pending int64 }
		}
		waitFor(t, name+"'s history sampled", func() bool {
			code, body := get(t, base+"/db/"+name+"/api/v1/stats/history", "")
			if code != 200 || json.Unmarshal([]byte(body), &hist) != nil {
				t.Fatalf("%s history: %d %s", name, code, body)
			}
			return len(hist.Samples) > 0
		})
		if got := hist.Samples[len(hist.Samples)-1].Pending; got != want {
			t.Errorf("%s history: %d pending in the last sample, want %d", name, got, want)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("relay exited %d\n%s", code, stderr)
	}
}

// TestFleetAdminSamplerStops: a database the relay serves is shown over
// the relay's own connections with its history sampled; the sampler stops
// when the relay stops serving it (the next request opens the page with
// its own connections) and when the database leaves the list, and the
// admin never closes the relay's connections.
func TestFleetAdminSamplerStops(t *testing.T) {
	lite := testdb.New(t, store.SQLite)
	e := testEnv(t.Context(), nil, nil, io.Discard, io.Discard)
	fa := &fleetAdmin{e: e, open: map[string]*adminDB{}, cfg: admin.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	fa.setList([]fleet.Database{{Name: "one", URL: lite.URL}})
	defer fa.close()
	relayDB, err := dburl.Open(t.Context(), lite.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer relayDB.Close()
	// page is name's admin server, and whether it goes over the relay's
	// connections.
	page := func() (*admin.Server, bool) {
		srv, done, err := fa.server(t.Context(), "one")
		if err != nil || srv == nil {
			t.Fatalf("server: %v, %v", srv, err)
		}
		done()
		fa.mu.Lock()
		defer fa.mu.Unlock()
		return srv, fa.open["one"].db == relayDB
	}
	samples := func(srv *admin.Server) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/api/v1/stats/history", nil)
		req.Host = "127.0.0.1"
		srv.ServeHTTP(rec, req)
		var hist struct{ Samples []json.RawMessage }
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &hist) != nil {
			t.Fatalf("history: %d %s", rec.Code, rec.Body)
		}
		return len(hist.Samples)
	}
	stop := fa.serve("one", lite.URL, relayDB)
	served, over := page()
	if !over {
		t.Fatal("a served database's page does not go over the relay's connections")
	}
	waitFor(t, "the served database's history sampled", func() bool { return samples(served) > 0 })
	stop()
	// Run returns nil on a done context unless another Run samples.
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if err := served.Run(done); err != nil {
		t.Fatalf("the sampler still runs after the relay stopped serving the database: %v", err)
	}
	if again, over := page(); again == served || over || samples(again) != 0 {
		t.Fatalf("after the relay stopped serving: the same page %v, over the relay's connections %v; want a page of its own, without history", again == served, over)
	}
	fa.serve("one", lite.URL, relayDB)
	fa.setList(nil)
	fa.mu.Lock()
	n := len(fa.open)
	fa.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d admin servers open after the list emptied", n)
	}
	if _, err := relayDB.Backend().Store.DB().Exec(t.Context(), "SELECT 1"); err != nil {
		t.Fatalf("the relay's database after the admin let it go: %v", err)
	}
}

// TestRelayFleetCoordinationStaysPut: without --fleet-db the coordination
// database is the list's first line when the relay starts, for the
// process's life. A new first line in the file says so in the log (relays
// started later would coordinate there, apart from this one), naming both
// databases without credentials; the databases are still served as listed.
func TestRelayFleetCoordinationStaysPut(t *testing.T) {
	f := startFleetAdmin(t, "coord", 0)
	a, b, list, stderr, stop := f.a, f.b, f.list, f.stderr, f.stop
	defer func() {
		if code := stop(); code != 0 {
			t.Errorf("relay exited %d\n%s", code, stderr)
		}
	}()
	if err := os.WriteFile(list, []byte("coord-b "+b.URL+"\ncoord-a "+a.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the list change", func() bool { return strings.Contains(stderr.String(), "database list changed") })
	var warning string
	for line := range strings.Lines(stderr.String()) {
		if strings.Contains(line, "first line changed") {
			warning = line
		}
	}
	if warning == "" || !strings.Contains(warning, "first_line=coord-b") || !strings.Contains(warning, "--fleet-db") {
		t.Fatalf("no warning naming the new first line and --fleet-db:\n%s", stderr)
	}
	if !strings.Contains(warning, fleet.DefaultName(a.URL)) {
		t.Errorf("the warning does not name the coordination database %s: %s", fleet.DefaultName(a.URL), warning)
	}
	// The same first line again, other lines changed: nothing more to say.
	before := strings.Count(stderr.String(), "first line changed")
	if err := os.WriteFile(list, []byte("coord-b "+b.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second list change", func() bool { return strings.Count(stderr.String(), "database list changed") >= 2 })
	if n := strings.Count(stderr.String(), "first line changed"); n != before {
		t.Errorf("%d warnings after a change that kept the first line, want %d", n, before)
	}
}

// fleetAdminRun is a relay started over a list of two SQLite databases,
// PREFIX-a holding one pending message and PREFIX-b pendingB, serving the
// admin on a free port.
type fleetAdminRun struct {
	a, b   *testdb.DB
	list   string // the --db-file
	addr   string // the admin's
	stderr *syncbuf.Buffer
	stop   func() int
}

func startFleetAdmin(t *testing.T, prefix string, pendingB int) *fleetAdminRun {
	t.Helper()
	f := &fleetAdminRun{a: testdb.New(t, store.SQLite), b: testdb.New(t, store.SQLite)}
	vars := map[string]string{}
	enqueueOK(t, vars, "--db", f.a.URL, "--topic", prefix+".a", "--payload", `{}`, "--delay", "1h")
	for range pendingB {
		enqueueOK(t, vars, "--db", f.b.URL, "--topic", prefix+".b", "--payload", `{}`, "--delay", "1h")
	}
	f.list = writeFile(t, "databases", prefix+"-a "+f.a.URL+"\n"+prefix+"-b "+f.b.URL+"\n")
	f.addr, f.stderr, f.stop = startListening(t, "admin", vars, "relay", "--db-file", f.list, "--to", "stdout://", "--admin", "127.0.0.1:0")
	return f
}
