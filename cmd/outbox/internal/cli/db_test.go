package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// forDialects runs fn in parallel on each database.
func forDialects(t *testing.T, fn func(t *testing.T, d store.Dialect)) {
	t.Helper()
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, d)
		})
	}
}

func dbVars(db *testdb.DB) map[string]string {
	return map[string]string{"OUTBOX_DATABASE_URL": db.URL}
}

func status(t *testing.T, vars map[string]string) store.StatsJSON {
	t.Helper()
	var st store.StatsJSON
	run(t, vars, "status", "--json").ok(t).decode(t, &st)
	return st
}

// TestMigrate: migrate on an empty database, again (idempotent), then the
// contract's minimal foreign INSERT works and shows up in status.
func TestMigrate(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.Empty(t, d)
		r := run(t, nil, "migrate", "--db", db.URL).ok(t)
		if !strings.HasPrefix(r.stdout, "applied migration") || !strings.Contains(r.stdout, " 1") {
			t.Errorf("first migrate: %q", r.stdout)
		}
		r = run(t, nil, "migrate", "--db", db.URL).ok(t)
		if !strings.Contains(r.stdout, "up to date") {
			t.Errorf("second migrate: %q", r.stdout)
		}
		db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('order.created', 'order-42', '{"order_id":42}')`)
		st := status(t, dbVars(db))
		if st.Pending != 1 || st.Sent != 0 || st.Dead != 0 || st.Consumed != 0 {
			t.Errorf("status after foreign insert: %+v", st)
		}
		if len(st.Topics) != 1 || st.Topics[0] != (store.TopicJSON{Topic: "order.created", Status: "pending", Count: 1}) {
			t.Errorf("topics: %+v", st.Topics)
		}
		if st.OldestPendingAgeSeconds < 0 || st.OldestPendingAgeSeconds > 600 {
			t.Errorf("oldest_pending_age_seconds = %v", st.OldestPendingAgeSeconds)
		}
	})
}

func TestMigrateSQL(t *testing.T) {
	t.Parallel()
	for _, d := range []string{"postgres", "mysql", "sqlite"} {
		r := run(t, nil, "migrate", "sql", "--dialect", d).ok(t)
		for _, want := range []string{"CREATE TABLE outbox_messages", "CREATE TABLE outbox_inbox"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: schema lacks %q", d, want)
			}
		}
	}
	// The dialect may come from the database URL, which is not opened.
	r := run(t, map[string]string{"OUTBOX_DATABASE_URL": "mysql://u:pw@127.0.0.1:1/x"}, "migrate", "sql").ok(t)
	if !strings.Contains(r.stdout, "ENGINE=InnoDB") {
		t.Errorf("dialect from URL: not the MySQL schema")
	}
}

// TestSchemaMissing: commands on a database without the tables say to run
// migrate.
func TestSchemaMissing(t *testing.T) {
	t.Parallel()
	db := testdb.Empty(t, store.SQLite)
	for _, args := range [][]string{
		{"status"}, {"dead", "list"}, {"dead", "requeue", "--all"},
		{"enqueue", "--topic", "a", "--payload", "{}"},
	} {
		run(t, dbVars(db), args...).failed(t, ExitFailure, "outbox migrate")
	}
	run(t, dbVars(db), "relay", "--to", "stdout://").failed(t, ExitFailure, "migrate")
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		vars := dbVars(db)
		id := enqueueOK(t, vars, "--topic", "order.created", "--key", "order-1",
			"--payload", `{"n":1}`, "--header", "x-tenant=acme", "--max-attempts", "3")
		file := writeFile(t, "payload.txt", "plain text")
		id2 := enqueueOK(t, vars, "--topic", "order.paid", "--payload-file", file,
			"--content-type", "text/plain", "--delay", "1h")
		id3 := strings.TrimSpace(runIn(t, vars, strings.NewReader(`{"n":3}`), "enqueue", "--topic", "order.created",
			"--payload-file", "-").ok(t).stdout)
		msgs, err := db.Store().List(context.Background(), store.Filter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 3 || msgs[0].MessageID != id || msgs[1].MessageID != id2 || msgs[2].MessageID != id3 {
			t.Fatalf("ids %q %q %q, rows %+v", id, id2, id3, msgs)
		}
		m := msgs[0]
		if m.Topic != "order.created" || m.Key != "order-1" || m.Payload != `{"n":1}` || m.MaxAttempts != 3 || !strings.Contains(m.Headers, `"x-tenant"`) {
			t.Errorf("first message: %+v", m)
		}
		if msgs[1].Payload != "plain text" || !msgs[1].AvailableAt.After(msgs[1].CreatedAt.Add(50*time.Minute)) {
			t.Errorf("delayed message: %+v", msgs[1])
		}
		if msgs[2].Payload != `{"n":3}` {
			t.Errorf("stdin payload: %q", msgs[2].Payload)
		}
		st := status(t, vars)
		if st.Pending != 3 {
			t.Errorf("status: %+v", st)
		}
		r := run(t, vars, "status").ok(t)
		for _, want := range []string{"pending", "order.created", "order.paid", "oldest pending"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("status output lacks %q:\n%s", want, r.stdout)
			}
		}

		// Validation errors are usage errors naming the flag; nothing is written.
		run(t, vars, "enqueue", "--topic", "bad topic!", "--payload", "{}").failed(t, ExitUsage, "--topic", "invalid topic")
		run(t, vars, "enqueue", "--topic", "a", "--payload", "{not json").failed(t, ExitUsage, "not valid JSON")
		run(t, vars, "enqueue", "--topic", "a", "--payload", "{}", "--header", "outbox-topic=x").failed(t, ExitUsage, "--header", "reserved")
		run(t, vars, "enqueue", "--topic", "a", "--payload", "{}", "--id", "nope").failed(t, ExitUsage, "--id")
		run(t, vars, "enqueue", "--topic", "a", "--payload", "{}", "--id", id).failed(t, ExitFailure, "duplicate message id")
		run(t, vars, "enqueue", "--topic", "a", "--payload", "{}", "--ttl", "-1s").failed(t, ExitUsage, "--ttl must not be negative")
		if n := db.Count(t, "SELECT count(*) FROM outbox_messages"); n != 3 {
			t.Errorf("%d rows after rejected enqueues, want 3", n)
		}
		// --ttl: expires_at is the database's now() plus it.
		enqueueOK(t, vars, "--topic", "code.sent", "--payload", `{"code":"481516"}`, "--ttl", "2m")
		if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 'code.sent' AND expires_at > "+testdb.Ago(d, -time.Minute)+" AND expires_at < "+testdb.Ago(d, -3*time.Minute)); n != 1 {
			t.Errorf("enqueue --ttl 2m: expires_at is not 2 minutes ahead")
		}
	})
}

func TestEnqueuePayloadLimit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	cfg := writeFile(t, "outbox.yaml", "database: "+db.URL+"\nrelay: {max_payload_bytes: 10}\n")
	runIn(t, nil, strings.NewReader(`"`+strings.Repeat("x", 100)+`"`), "enqueue", "--config", cfg, "--topic", "a", "--payload-file", "-").
		failed(t, ExitUsage, "payload too large", "limit 10")
}

// markDead makes every message of topic dead with last_error 'boom'.
func markDead(t *testing.T, db *testdb.DB, topic string) {
	t.Helper()
	db.Exec(t, fmt.Sprintf("UPDATE outbox_messages SET status = 'dead', attempts = 3, last_error = 'boom\nsecond line' WHERE topic = '%s'", topic))
}

func TestDead(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		vars := dbVars(db)
		enq := func(topic, key string) string {
			return enqueueOK(t, vars, "--topic", topic, "--key", key, "--payload", "{}")
		}
		a1, a2 := enq("billing.failed", "k1"), enq("billing.failed", "k2")
		b1 := enq("mail.bounced", "")
		enq("order.created", "k3")
		markDead(t, db, "billing.failed")
		markDead(t, db, "mail.bounced")

		var list []map[string]any
		run(t, vars, "dead", "list", "--json").ok(t).decode(t, &list)
		if len(list) != 3 {
			t.Fatalf("dead list: %v", list)
		}
		first := list[0]
		if first["message_id"] != a1 || first["topic"] != "billing.failed" || first["business_key"] != "k1" ||
			first["attempts"] != 3.0 || first["last_error"] != "boom\nsecond line" || first["created_at"] == nil {
			t.Errorf("first dead message: %v", first)
		}
		if list[2]["business_key"] != "" {
			t.Errorf("no key: %v", list[2]["business_key"])
		}
		if _, has := first["payload"]; has || first["died_at"] == nil || first["died_at"].(string) < first["created_at"].(string) {
			t.Errorf("dead list --json: want died_at, no later than created_at, and no payload: %v", first)
		}
		var full []map[string]any
		run(t, vars, "dead", "list", "--json", "--with-payload").ok(t).decode(t, &full)
		if hs, _ := full[0]["headers"].(map[string]any); len(full) != 3 || full[0]["payload"] != "{}" || hs["content-type"] == nil {
			t.Errorf("dead list --json --with-payload: %v", full[0])
		}
		list = nil
		run(t, vars, "dead", "list", "--topic", "mail.bounced", "--json").ok(t).decode(t, &list)
		if len(list) != 1 || list[0]["message_id"] != b1 {
			t.Errorf("dead list --topic: %v", list)
		}
		r := run(t, vars, "dead", "list", "--limit", "2").ok(t)
		if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 4 ||
			!strings.Contains(lines[0], "DIED") || !strings.Contains(lines[1], a1) || !strings.Contains(lines[1], "boom second line") || !strings.Contains(lines[3], "raise --limit") {
			t.Errorf("human dead list:\n%s", r.stdout)
		}

		// requeue one by id (upper case is accepted), then a miss.
		r = run(t, vars, "dead", "requeue", "--id", strings.ToUpper(a1)).ok(t)
		if r.stdout != "requeued 1 dead message\n" {
			t.Errorf("requeue --id: %q", r.stdout)
		}
		run(t, vars, "dead", "requeue", "--id", a1).failed(t, ExitFailure, "no dead message with id "+a1)
		r = run(t, vars, "dead", "requeue", "--id", a1, "--id", a2).ok(t)
		if !strings.HasPrefix(r.stdout, "requeued 1 dead message (1 of 2 ids matched") {
			t.Errorf("partial requeue: %q", r.stdout)
		}
		st := status(t, vars)
		if st.Pending != 3 || st.Dead != 1 {
			t.Errorf("after requeue: %+v", st)
		}
		var attempts int
		if err := db.SQL.QueryRow(testdb.Placeholder(d, "SELECT attempts FROM outbox_messages WHERE message_id = ?"), a1).Scan(&attempts); err != nil || attempts != 0 {
			t.Errorf("attempts after requeue = %d, %v", attempts, err)
		}

		// discard by topic, then --all with nothing left.
		r = run(t, vars, "dead", "discard", "--topic", "mail.bounced").ok(t)
		if r.stdout != "discarded 1 dead message\n" {
			t.Errorf("discard --topic: %q", r.stdout)
		}
		r = run(t, vars, "dead", "discard", "--all").ok(t)
		if r.stdout != "discarded 0 dead messages\n" {
			t.Errorf("discard --all: %q", r.stdout)
		}
		run(t, vars, "dead", "discard", "--id", b1).failed(t, ExitFailure, "no dead message with id")
		markDead(t, db, "order.created")
		r = run(t, vars, "dead", "requeue", "--all").ok(t)
		if r.stdout != "requeued 1 dead message\n" {
			t.Errorf("requeue --all: %q", r.stdout)
		}
		if r := run(t, vars, "dead", "list").ok(t); r.stdout != "no dead messages\n" {
			t.Errorf("empty dead list: %q", r.stdout)
		}
		list = nil
		run(t, vars, "dead", "list", "--json").ok(t).decode(t, &list)
		if list == nil || len(list) != 0 {
			t.Errorf("empty JSON list: %q", r.stdout)
		}
		if n := db.Count(t, "SELECT count(*) FROM outbox_messages"); n != 3 {
			t.Errorf("%d rows left, want 3", n)
		}
	})
}

// waitFor polls cond until it holds or the test's deadline nears.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := t.Deadline(); ok && time.Until(d) < 35*time.Second {
		deadline = d.Add(-5 * time.Second)
	}
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startRelay runs the relay command until the returned stop function is
// called; stop returns its exit status.
func startRelay(t *testing.T, vars map[string]string, stdout, stderr *syncbuf.Buffer, args ...string) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		done <- testEnv(ctx, vars, nil, stdout, stderr).main(append([]string{"relay"}, args...))
	}()
	t.Cleanup(cancel)
	return func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Fatal("relay did not stop within 30s of cancellation")
			return -1
		}
	}
}

func TestRelayStdout(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		vars := dbVars(db)
		var ids []string
		for i := range 5 {
			ids = append(ids, enqueueOK(t, vars, "--topic", "order.created",
				"--key", fmt.Sprintf("order-%d", i%2), "--payload", fmt.Sprintf(`{"n":%d}`, i)))
		}
		var stdout, stderr syncbuf.Buffer
		stop := startRelay(t, vars, &stdout, &stderr, "--to", "stdout://", "--log-level", "debug", "--lease-ttl", "1s")
		waitFor(t, "every message sent", func() bool {
			st, err := db.Store().Stats(context.Background())
			return err == nil && st.Pending == 0 && st.Sent == 5
		})
		// A message enqueued while the relay runs is delivered too.
		late := enqueueOK(t, vars, "--topic", "order.paid", "--payload", "{}")
		ids = append(ids, late)
		waitFor(t, "the late message sent", func() bool { return strings.Contains(stdout.String(), late) })
		if code := stop(); code != 0 {
			t.Fatalf("relay exit %d\nstderr: %s", code, stderr.String())
		}
		out := stdout.String()
		for _, id := range ids {
			if strings.Count(out, `"message_id":"`+id+`"`) != 1 {
				t.Errorf("message %s is not on stdout exactly once:\n%s", id, out)
			}
		}
		logs := stderr.String()
		if !strings.Contains(logs, "outbox relay: started") || !strings.Contains(logs, "outbox relay: stopped") {
			t.Errorf("relay logs:\n%s", logs)
		}
	})
}

// TestRelayConfigFile: routes, database and settings from a config file;
// a topic no route matches goes dead.
func TestRelayConfigFile(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	cfg := writeFile(t, "outbox.yaml", `
database: `+db.URL+`
routes:
  - pattern: "order.*"
    to: stdout://
    destination: orders
    retry: {base: 10ms, cap: 1s}
relay:
  batch_size: 10
  lease_ttl: 1s
  min_poll: 1ms
  max_poll: 50ms
retry:
  schedule: [10ms, 20ms]
log: {level: warn, format: json}
`)
	vars := map[string]string{"OUTBOX_CONFIG": cfg}
	routed := enqueueOK(t, vars, "--topic", "order.created", "--payload", "{}")
	stray := enqueueOK(t, vars, "--topic", "audit.log", "--payload", "{}")
	var stdout, stderr syncbuf.Buffer
	stop := startRelay(t, vars, &stdout, &stderr)
	waitFor(t, "both messages settled", func() bool {
		st, err := db.Store().Stats(context.Background())
		return err == nil && st.Sent == 1 && st.Dead == 1
	})
	if code := stop(); code != 0 {
		t.Fatalf("relay exit %d\nstderr: %s", code, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, routed) || !strings.Contains(out, `"destination":"orders"`) || strings.Contains(out, stray) {
		t.Errorf("stdout:\n%s", out)
	}
	var list []deadJSON
	run(t, vars, "dead", "list", "--json").ok(t).decode(t, &list)
	if len(list) != 1 || list[0].MessageID != stray || !strings.Contains(list[0].LastError, "no route") {
		t.Errorf("dead: %+v", list)
	}
	// warn level in JSON: no info lines, and any line is JSON.
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" && (!strings.HasPrefix(line, "{") || strings.Contains(line, `"level":"INFO"`)) {
			t.Errorf("log line %q", line)
		}
	}
}

// TestRelaySettings: flags win over OUTBOX_ variables, which win over the
// config file.
func TestRelaySettings(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("c.yaml", []byte(`
to: stdout://
webhook_secret: from-config-secret
routes:
  - {pattern: "a.*", to: "https://example.com/a", secret: per-route-secret, retry: {schedule: ["1s,2s", 3s]}}
  - {pattern: "b.>", to: "https://example.com/b"}
relay: {batch_size: 7, lease_ttl: 2s, publish_timeout: 3s}
retry: {base: 4s}
`))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	f := newRelayFlags(fs)
	if err := fs.Parse([]string{"--lease-ttl", "9s", "--route", "c.*=stdout://", "--retry-cap", "1m"}); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"OUTBOX_BATCH_SIZE": "8", "OUTBOX_WEBHOOK_SECRET": "from-env-webhook-secret", "OUTBOX_TO": "https://example.com/last"}
	r := &resolver{e: testEnv(t.Context(), vars, nil, nil, nil), set: setFlags(fs), cfg: cfg}
	rc, err := resolveRelayConfig(r, f)
	if err != nil {
		t.Fatal(err)
	}
	if rc.BatchSize != 8 || rc.LeaseTTL != 9*time.Second || rc.PublishTimeout != 3*time.Second ||
		rc.Retry.Base != 4*time.Second || rc.Retry.Cap != time.Minute {
		t.Errorf("relay config: %+v", rc)
	}
	specs, err := routeSpecs(r, f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, s.pattern+" "+s.url+" "+s.secret)
	}
	want := []string{
		"c.* stdout:// from-env-webhook-secret",
		"a.* https://example.com/a per-route-secret",
		"b.> https://example.com/b from-env-webhook-secret",
		"* https://example.com/last from-env-webhook-secret",
	}
	if !slices.Equal(got, want) {
		t.Errorf("routes:\n%q\nwant\n%q", got, want)
	}
	if s := specs[1].retry; s == nil || !slices.Equal(s.Schedule, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}) {
		t.Errorf("route retry: %+v", s)
	}
}

func TestSQLiteRelativeURL(t *testing.T) {
	t.Parallel()
	abs := filepath.Join(t.TempDir(), "rel.db")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(cwd, abs)
	if err != nil || filepath.IsAbs(rel) {
		testdb.Unavailable(t, "a relative path from "+cwd+" to "+abs, err)
	}
	run(t, nil, "migrate", "--db", "sqlite://"+abs).ok(t)
	run(t, nil, "enqueue", "--db", "sqlite://"+rel, "--topic", "a", "--payload", "{}").ok(t)
	if st := status(t, map[string]string{"OUTBOX_DATABASE_URL": "sqlite://" + abs}); st.Pending != 1 {
		t.Errorf("absolute and relative URLs do not name one file: %+v", st)
	}
}
