package adoptyaml

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/adopt"
)

const fullMapping = `
table: outgoing_events
columns:
  id: id
  message_id: event_uuid
  topic: event_type
  key: aggregate_id
  payload: body
  headers: meta
  header_columns:
    tenant: tenant_id
  status: state
  attempts: tries
  max_attempts: max_tries
  next_attempt: retry_at
  error: last_error
  created_at: created
  updated_at: changed
status:
  pending: new
  sent: done
  failed: retry
  dead: gave_up
  consumed: acked
`

func TestParseFullMapping(t *testing.T) {
	p, err := Parse([]byte(fullMapping))
	if err != nil {
		t.Fatal(err)
	}
	if p.Table != "outgoing_events" || p.MessageID != "event_uuid" || p.Key != "aggregate_id" || p.HeaderCol["tenant"] != "tenant_id" {
		t.Errorf("columns: %+v", p)
	}
	if p.Pending != "new" || p.Sent != "done" || p.Failed != "retry" || p.Dead != "gave_up" || p.Consumed != "acked" {
		t.Errorf("status values: %+v", p)
	}
	if p.DeadIsFailed() || p.FixedMaxAttempts != 0 {
		t.Errorf("dead is its own value and max attempts a column: %+v", p)
	}
}

func TestParseMinimalMapping(t *testing.T) {
	p, err := Parse([]byte(`
table: jobs
topic: jobs.run
columns: {id: id, payload: body, status: st, attempts: n, next_attempt: at}
status: {pending: 0, sent: 1, failed: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	if p.FixedTopic != "jobs.run" || p.Dead != "2" || !p.DeadIsFailed() || p.FixedMaxAttempts != adopt.DefaultMaxAttempts {
		t.Errorf("defaults: %+v", p)
	}
}

// TestParseErrors: every bad mapping is refused with a one-line error
// naming the field.
func TestParseErrors(t *testing.T) {
	base := "columns: {id: id, payload: body, status: st, attempts: n, next_attempt: at, topic: tp}\nstatus: {pending: p, sent: s, failed: f}\n"
	for _, c := range []struct{ yaml, want string }{
		{"", "empty mapping"},
		{base, "table: missing"},
		{"table: x; drop table y\n" + base, "table: \"x; drop table y\" is not a plain identifier"},
		{"table: t\ncolumns: {id: id, status: st, attempts: n, topic: tp}\nstatus: {pending: p, sent: s, failed: f}\n", "columns.payload: missing"},
		{"table: t\ncolumns: {id: id, payload: body, status: st, attempts: n}\nstatus: {pending: p, sent: s, failed: f}\n", "topic: the table has no topic column"},
		{"table: t\ncolumns: {id: id, payload: id, status: st, attempts: n, topic: tp}\nstatus: {pending: p, sent: s, failed: f}\n", `columns.payload: column "id" is already columns.id`},
		{"table: t\ncolumns: {id: id, payload: body, status: st, attempts: n, topic: tp}\nstatus: {pending: p, sent: p, failed: f}\n", `status.sent: "p" must differ`},
		{"table: t\ncolumns: {id: id, payload: body, status: st, attempts: n, topic: tp}\nstatus: {pending: p, failed: f}\n", "status.sent: missing"},
		{"table: t\ncolumns: {id: id, payload: body, status: st, attempts: n, topic: tp}\nstatus: {pending: \"it's\", sent: s, failed: f}\n", "status.pending: \"it's\" may hold only"},
		{"table: t\ncolumns: {id: id, payload: body, status: st, attempts: n, topic: tp}\nstatus: {pending: [a], sent: s, failed: f}\n", "status.pending: want a string or an integer"},
		{"table: t\ncolumns: {id: id, payload: body, status: st, attempts: n, topic: tp, colour: c}\nstatus: {pending: p, sent: s, failed: f}\n", "field colour not found"},
		{"table: t\ncolumns: {id: id, payload: body, status: st, attempts: n, topic: tp}\nstatus: {pending: p, sent: s, failed: f}\n", "columns.next_attempt: missing"},
		{"table: t\nmax_attempts: 0\n" + base, "max_attempts must be at least 1"},
		{"table: t\ncolumns: {id: id, payload: body, status: st, attempts: n, topic: tp, header_columns: {Tag: tag}}\nstatus: {pending: p, sent: s, failed: f}\n", `header name "Tag" must be lower case`},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil {
			t.Errorf("%q: no error, want %q", c.yaml, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %q, want one line with %q", c.yaml, err, c.want)
		}
	}
}

func TestLoad(t *testing.T) {
	for _, name := range adopt.Builtin {
		p, err := Load(name)
		if err != nil || p.Name != name || p.Validate() != nil {
			t.Errorf("built-in %s: %v, %v", name, p, err)
		}
	}
	if _, err := Load("django"); err == nil || !strings.Contains(err.Error(), "unknown profile \"django\"") {
		t.Errorf("unknown profile: %v", err)
	}
	path := filepath.Join(t.TempDir(), "events.yaml")
	if err := os.WriteFile(path, []byte(fullMapping), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil || p.Table != "outgoing_events" || p.Name != path {
		t.Errorf("file: %v, %v", p, err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}
