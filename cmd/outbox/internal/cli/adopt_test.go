package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestAdoptCheckAndSQL: on every database, `adopt check` passes the
// Laravel table as its DDL stands, says the design note's table lacks
// the due-rows index and the Spring table the key index (exit 1); the
// DDL `adopt sql` prints is additive only, and once applied the tables
// fit.
func TestAdoptCheckAndSQL(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		vars := dbVars(db)
		for _, c := range []struct{ profile, missing string }{
			{"laravel", ""},
			{"codes", "no index on (status, next_retry_time)"},
			{"spring", "no index on (business_key, id)"},
		} {
			adopttest.Create(t, db, c.profile)
			r := run(t, vars, "adopt", "check", "--adopt", c.profile)
			if c.missing == "" {
				r.ok(t)
				if !strings.Contains(r.stdout, "fits profile "+c.profile) {
					t.Errorf("%s: %s", c.profile, r.stdout)
				}
				continue
			}
			if r.code != ExitFailure || !strings.Contains(r.stdout, c.missing) {
				t.Errorf("%s: exit %d, stdout %q; want 1 and %q", c.profile, r.code, r.stdout, c.missing)
			}
			ddl := run(t, nil, "adopt", "sql", "--adopt", c.profile, "--dialect", string(d)).ok(t).stdout
			for stmt := range strings.SplitSeq(ddl, ";\n") {
				var sql []string
				for line := range strings.Lines(stmt) {
					if !strings.HasPrefix(line, "--") {
						sql = append(sql, line)
					}
				}
				s := strings.TrimSpace(strings.Join(sql, ""))
				if s == "" {
					continue
				}
				if !strings.HasPrefix(s, "CREATE INDEX ") && (d != store.Postgres || !strings.HasPrefix(s, "CREATE TRIGGER ")) {
					t.Errorf("%s: adopt sql prints %q, not only CREATE INDEX (and CREATE TRIGGER on PostgreSQL)", c.profile, s)
				}
				db.Exec(t, s)
			}
			r = run(t, vars, "adopt", "check", "--adopt", c.profile).ok(t)
			if !strings.Contains(r.stdout, "fits profile "+c.profile) {
				t.Errorf("%s after adopt sql: %s", c.profile, r.stdout)
			}
		}
	})
}

// TestAdoptCheckMisfit: a mapping naming a column the table lacks and a
// column of the wrong type is told so (exit 1); a missing table too.
func TestAdoptCheckMisfit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, "sqlite")
	db.Exec(t, "CREATE TABLE events (id INTEGER PRIMARY KEY, body TEXT, state TEXT, tries TEXT, due_at TEXT)")
	mapping := writeFile(t, "events.yaml", `table: events
topic: events.out
columns: {id: id, payload: body, status: state, attempts: tries, next_attempt: due_at, error: why}
status: {pending: new, sent: done, failed: retry}
`)
	r := run(t, dbVars(db), "adopt", "check", "--adopt", mapping)
	for _, want := range []string{"missing column why (error)", "column tries (attempts) has type TEXT, wants int"} {
		if r.code != ExitFailure || !strings.Contains(r.stdout, want) {
			t.Errorf("exit %d, stdout %q; want 1 and %q", r.code, r.stdout, want)
		}
	}
	r = run(t, dbVars(db), "adopt", "check", "--adopt", "laravel")
	if r.code != ExitFailure || !strings.Contains(r.stdout, "local_messages: no such table") {
		t.Errorf("missing table: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestAdoptUsage: bad profiles and mappings are usage errors, one line.
func TestAdoptUsage(t *testing.T) {
	t.Parallel()
	bad := writeFile(t, "bad.yaml", "table: t\ncolumns: {id: id}\n")
	run(t, nil, "adopt", "sql", "--adopt", "django", "--dialect", "mysql").failed(t, ExitUsage, `unknown profile "django"`)
	run(t, nil, "adopt", "sql", "--adopt", bad, "--dialect", "mysql").failed(t, ExitUsage, "columns.payload: missing")
	run(t, nil, "adopt", "sql", "--adopt", "laravel").failed(t, ExitUsage, "--dialect are required")
	run(t, nil, "relay", "--adopt", bad, "--to", "stdout://", "--db", "sqlite:///nonexistent/x.db").failed(t, ExitUsage, "columns.payload: missing")
}

// springRow is a row of the Spring profile's table: its status, retry
// count and error message.
type springRow struct {
	status  string
	retries int
	err     string
}

// insertSpring inserts rows into the Spring profile's table
// t_local_message, topic user-register and tag sync-crm, each with 10
// retries at most: row i has message id m-i, business key user-i and the
// payload {"seq":i}.
func insertSpring(t *testing.T, db *testdb.DB, rows ...springRow) {
	t.Helper()
	for i, row := range rows {
		db.Exec(t, testdb.Placeholder(db.Dialect, "INSERT INTO t_local_message (message_id, topic, tag, business_key, payload, status, retry_count, max_retry, error_msg) VALUES (?, 'user-register', 'sync-crm', ?, ?, ?, ?, 10, ?)"),
			fmt.Sprintf("m-%d", i), fmt.Sprintf("user-%d", i), fmt.Sprintf(`{"seq":%d}`, i), row.status, row.retries, row.err)
	}
}

// TestAdoptStatusAndDead: status, dead list and dead requeue with
// --adopt read and change the adopted table in its own vocabulary; the
// Laravel table's derived message ids select its rows.
func TestAdoptStatusAndDead(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		vars := dbVars(db)
		adopttest.Create(t, db, "spring")
		insertSpring(t, db, springRow{"PENDING", 0, ""}, springRow{"PENDING", 0, ""}, springRow{"FAILED", 3, "timeout"}, springRow{"SENT", 0, ""},
			springRow{"CONSUMED", 0, ""}, springRow{"FAILED", 10, "boom"}, springRow{"FAILED", 10, "bang"})
		var st store.StatsJSON
		run(t, vars, "status", "--adopt", "spring", "--json").ok(t).decode(t, &st)
		if st.Pending != 3 || st.Sent != 1 || st.Consumed != 1 || st.Dead != 2 {
			t.Errorf("status: %+v, want 3 pending, 1 sent, 1 consumed, 2 dead", st)
		}
		var dead []deadJSON
		run(t, vars, "dead", "list", "--adopt", "spring", "--json").ok(t).decode(t, &dead)
		if len(dead) != 2 || dead[0].MessageID != "m-5" || dead[0].LastError != "boom" || dead[0].Attempts != 10 || dead[1].MessageID != "m-6" {
			t.Errorf("dead list: %+v", dead)
		}
		if r := run(t, vars, "dead", "requeue", "--adopt", "spring", "--all", "--dry-run").ok(t); !strings.Contains(r.stdout, "would requeue 2 dead messages") {
			t.Errorf("dry run: %s", r.stdout)
		}
		run(t, vars, "dead", "requeue", "--adopt", "spring", "--id", "m-5").ok(t)
		if n := db.Count(t, "SELECT count(*) FROM t_local_message WHERE message_id = 'm-5' AND status = 'PENDING' AND retry_count = 0"); n != 1 {
			t.Error("the requeued row is not PENDING with its retries reset")
		}
		run(t, vars, "dead", "requeue", "--adopt", "spring", "--id", "m-0").failed(t, ExitFailure, "no dead message with id m-0")
		run(t, vars, "dead", "discard", "--adopt", "spring", "--all").failed(t, ExitUsage, "only requeue works on an adopted table")

		adopttest.Create(t, db, "laravel")
		db.Exec(t, "INSERT INTO local_messages (topic, payload, status, retry_times, max_retry_times) VALUES ('order.created', '{}', 'failed', 3, 3)")
		run(t, vars, "dead", "list", "--adopt", "laravel", "--json").ok(t).decode(t, &dead)
		if len(dead) != 1 || dead[0].MessageID == "" {
			t.Fatalf("laravel dead list: %+v", dead)
		}
		run(t, vars, "dead", "requeue", "--adopt", "laravel", "--id", dead[0].MessageID).ok(t)
		if n := db.Count(t, "SELECT count(*) FROM local_messages WHERE status = 'pending' AND retry_times = 0"); n != 1 {
			t.Error("the Laravel row was not requeued by its derived id")
		}
	})
}

// TestAdoptRelayRefuses: a relay under --adopt does not start on a table
// that does not fit (exit 1, the problem named), nor with retention, nor
// with the admin surface over a fleet (exit 2).
func TestAdoptRelayRefuses(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, "sqlite")
	vars := dbVars(db)
	if r := run(t, vars, "relay", "--adopt", "codes", "--to", "stdout://"); r.code != ExitFailure ||
		!strings.Contains(r.stderr, "outbox: relay start: table local_message does not fit profile codes: no such table") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	run(t, vars, "relay", "--adopt", "codes", "--to", "stdout://", "--retention-sent", "24h").failed(t, ExitUsage, "--adopt does not go with retention")
	other := testdb.New(t, "sqlite")
	run(t, vars, "relay", "--adopt", "codes", "--db", db.URL, "--db", other.URL, "--to", "stdout://", "--admin", ":0").failed(t, ExitUsage, "--adopt over a fleet does not serve the admin API")
}
