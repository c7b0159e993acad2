package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMigrateSQLFrom: --from N prints only the versions above N.
func TestMigrateSQLFrom(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "migrate", "sql", "--dialect", "postgres", "--from", "3").ok(t)
	if strings.Contains(r.stdout, "CREATE TABLE outbox_messages") || strings.Contains(r.stdout, "VALUES (3)") {
		t.Errorf("--from 3 prints versions up to 3:\n%s", r.stdout)
	}
	for _, want := range []string{"-- migration 004_read_function", "VALUES (4)", "VALUES (5)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--from 3 lacks %q", want)
		}
	}
	run(t, nil, "migrate", "sql", "--dialect", "sqlite", "--from", "99").failed(t, ExitUsage, "version 99")
}

// TestMigrateSQLFormats: each tool's file names, numbered from --start,
// and files that exist are never overwritten.
func TestMigrateSQLFormats(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		format string
		want   []string
	}{
		{"goose", []string{"00010_outbox_init.sql", "00014_outbox_cached_plans.sql"}},
		{"golang-migrate", []string{"00010_outbox_init.up.sql", "00010_outbox_init.down.sql", "00014_outbox_cached_plans.down.sql"}},
		{"atlas", []string{"00010_outbox_init.sql", "atlas.sum"}},
	} {
		t.Run(c.format, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "migrations")
			r := run(t, nil, "migrate", "sql", "--dialect", "mysql", "--format", c.format, "--out", dir, "--start", "10").ok(t)
			var names []string
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				names = append(names, filepath.Base(l))
			}
			for _, w := range c.want {
				if !slices.Contains(names, w) {
					t.Errorf("wrote %v, want %s among them", names, w)
				}
			}
			first := filepath.Join(dir, c.want[0])
			b, err := os.ReadFile(first)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "INSERT INTO outbox_schema_migrations (version) VALUES (1)") && !strings.HasSuffix(first, ".down.sql") {
				t.Errorf("%s does not record outbox version 1:\n%s", first, b)
			}
			if err := os.WriteFile(first, []byte("-- edited\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, nil, "migrate", "sql", "--dialect", "mysql", "--format", c.format, "--out", dir, "--start", "10").failed(t, ExitFailure, "exists")
			if b, _ := os.ReadFile(first); string(b) != "-- edited\n" {
				t.Errorf("%s was overwritten", first)
			}
		})
	}
}

// TestMigrateSQLFormatErrors: bad combinations are one usage line.
func TestMigrateSQLFormatErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "goose"}, "--out"},
		{[]string{"--out", dir}, "--format"},
		{[]string{"--format", "flyway", "--out", dir}, "flyway"},
		{[]string{"--format", "goose", "--out", dir, "--start", "0"}, "at least 1"},
		{[]string{"--inbox-only", "--from", "2"}, "--inbox-only"},
		{[]string{"--partitioned", "--dialect", "mysql"}, "PostgreSQL"},
	} {
		args := append([]string{"migrate", "sql", "--dialect", "sqlite"}, c.args...)
		if slices.Contains(c.args, "--dialect") {
			args = append([]string{"migrate", "sql"}, c.args...)
		}
		run(t, nil, args...).failed(t, ExitUsage, c.want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused command wrote %d files", len(entries))
	}
}
