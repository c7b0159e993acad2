package cli

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/adopt/adopttest"
	"github.com/txoutbox/outbox/internal/testdb"
)

// TestAdoptCheckAndSQL: on every database, `adopt check` passes the
// Laravel table as its DDL stands, says the design note's table lacks
// the due-rows index and the Spring table the key index (exit 1); the
// DDL `adopt sql` prints is additive only, and once applied the tables
// fit.
func TestAdoptCheckAndSQL(t *testing.T) {
	t.Parallel()
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
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
					if !strings.HasPrefix(s, "CREATE INDEX ") {
						t.Errorf("%s: adopt sql prints %q, not only CREATE INDEX", c.profile, s)
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
