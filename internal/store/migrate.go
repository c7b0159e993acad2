package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/txoutbox/outbox/driver"
)

//go:embed migrations
var migrationFS embed.FS

// Migration is one versioned schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
	// Down undoes SQL, for migration tools that step back (the file
	// NNN_name.down.sql beside NNN_name.sql). The outbox's own Migrate
	// never runs it.
	Down string
}

// Migrations returns the dialect's migrations in version order.
func Migrations(d Dialect) ([]Migration, error) {
	return readMigrations("migrations/" + string(d))
}

// MigrateOptions choose among a dialect's schema layouts.
type MigrateOptions struct {
	// Partitioned creates outbox_messages partitioned by day (PostgreSQL
	// only): the migrations of migrations/postgres-partitioned replace
	// those of the same version, every other version is shared, so later
	// upgrades apply to both layouts.
	Partitioned bool
}

// partitionedDir holds the versions that differ on a partitioned table.
const partitionedDir = "migrations/postgres-partitioned"

// MigrationsWith returns d's migrations for the layout o chooses.
func MigrationsWith(d Dialect, o MigrateOptions) ([]Migration, error) {
	ms, err := Migrations(d)
	if err != nil || !o.Partitioned {
		return ms, err
	}
	if d != Postgres {
		return nil, fmt.Errorf("a partitioned outbox_messages needs PostgreSQL, not %s", d)
	}
	over, err := readMigrations(partitionedDir)
	if err != nil {
		return nil, err
	}
	for _, o := range over {
		for i := range ms {
			if ms[i].Version == o.Version {
				ms[i] = o
			}
		}
	}
	return ms, nil
}

func readMigrations(dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	downs := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("bad migration file name %q", name)
		}
		b, err := migrationFS.ReadFile(dir + "/" + name)
		if err != nil {
			return nil, err
		}
		if base, ok := strings.CutSuffix(name, ".down.sql"); ok {
			downs[base] = string(b)
			continue
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(b)})
	}
	for i := range out {
		down, ok := downs[out[i].Name]
		if !ok {
			return nil, fmt.Errorf("migration %s/%s.sql has no %s.down.sql", dir, out[i].Name, out[i].Name)
		}
		out[i].Down = down
		delete(downs, out[i].Name)
	}
	for base := range downs {
		return nil, fmt.Errorf("migration %s/%s.down.sql undoes no migration", dir, base)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// SchemaSQL is every migration of d, ready for a user's own migration tool.
func SchemaSQL(d Dialect) (string, error) { return SchemaSQLWith(d, MigrateOptions{}) }

// SchemaSQLWith is every migration of d for the layout o chooses.
func SchemaSQLWith(d Dialect, o MigrateOptions) (string, error) { return SchemaSQLAfter(d, o, 0) }

// SchemaSQLAfter is what a schema of d (layout o) at version from lacks.
func SchemaSQLAfter(d Dialect, o MigrateOptions, from int) (string, error) {
	ms, err := MigrationsAfter(d, o, from)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "-- migration %s\n%s\n", m.Name, strings.TrimSpace(m.SQL))
		fmt.Fprintf(&b, "INSERT INTO outbox_schema_migrations (version) VALUES (%d);\n\n", m.Version)
	}
	return migrationsTableSQL(d) + ";\n\n" + b.String(), nil
}

func migrationsTableSQL(d Dialect) string { return dialectOf(d).statements().migrationsTable }

// SplitStatements splits a migration file at semicolons that end a line
// outside a $$-quoted function body.
func SplitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	inBody := false
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if !inBody && strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.Count(line, "$$")%2 == 1 {
			inBody = !inBody
		}
		if !inBody && strings.HasSuffix(trimmed, ";") {
			stmt := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			if stmt != "" {
				out = append(out, stmt)
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// Session is one database connection with transactions, for migrations.
type Session = driver.Session

// Migrate applies the migrations not yet applied and returns their
// versions. Concurrent callers are serialised by a database lock.
func Migrate(ctx context.Context, d Dialect, s Session) ([]int, error) {
	return MigrateWith(ctx, d, s, MigrateOptions{})
}

// MigrateWith is Migrate for the layout o chooses. A partitioned layout
// is refused on a database whose outbox_messages exists already and is
// not partitioned: converting it is a copy, not a migration.
func MigrateWith(ctx context.Context, d Dialect, s Session, o MigrateOptions) ([]int, error) {
	ms, err := MigrationsWith(d, o)
	if err != nil {
		return nil, err
	}
	if _, err := s.Exec(ctx, migrationsTableSQL(d)); err != nil {
		return nil, fmt.Errorf("create outbox_schema_migrations: %w", err)
	}
	unlock, err := lockMigrations(ctx, d, s)
	if err != nil {
		return nil, err
	}
	defer unlock()
	applied := map[int]bool{}
	rows, err := s.Query(ctx, "SELECT version FROM outbox_schema_migrations")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// An inbox-only migration created outbox_inbox's part of some
	// versions already (MigrateInbox): those statements are skipped.
	inboxDone, err := appliedVersions(ctx, d, s, inboxMigrationsTable)
	if err != nil {
		return nil, err
	}
	if o.Partitioned && applied[1] {
		on, err := partitioned(ctx, s)
		if err != nil {
			return nil, err
		}
		if !on {
			return nil, fmt.Errorf("outbox_messages exists and is not partitioned: a partitioned table replaces it only by copying the rows (see docs/retention.md)")
		}
	}
	var done []int
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		err := s.InTx(ctx, func(q Querier) error {
			for _, stmt := range SplitStatements(m.SQL) {
				if inboxDone[m.Version] && isInboxStatement(stmt) {
					continue
				}
				if _, err := q.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("migration %s: %w", m.Name, err)
				}
			}
			_, err := q.Exec(ctx, "INSERT INTO outbox_schema_migrations (version) VALUES ("+dialectOf(d).ph(1)+")", m.Version)
			return err
		})
		if err != nil {
			return done, err
		}
		done = append(done, m.Version)
	}
	return done, nil
}

// SchemaVersion is the highest applied migration, 0 when none.
func SchemaVersion(ctx context.Context, q Querier) (int, error) {
	return queryInt(ctx, q, "SELECT coalesce(max(version), 0) FROM outbox_schema_migrations")
}

// lockMigrations takes the lock that serialises migrations of d over s
// and returns its release.
func lockMigrations(ctx context.Context, d Dialect, s Session) (func(), error) {
	unlock, err := dialectOf(d).lockMigrations(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("lock migrations: %w", err)
	}
	return unlock, nil
}

// inboxMigrationsTable records the versions whose outbox_inbox statements
// MigrateInbox applied on a database that has no outbox schema (yet).
const inboxMigrationsTable = "outbox_inbox_migrations"

// inboxStatement matches a migration statement that creates, changes or
// indexes outbox_inbox, the consumer side's only table.
var inboxStatement = regexp.MustCompile(`(?is)^\s*(?:CREATE\s+TABLE(?:\s+IF\s+NOT\s+EXISTS)?|ALTER\s+TABLE|DROP\s+TABLE(?:\s+IF\s+EXISTS)?|CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?\w+\s+ON)\s+outbox_inbox\b`)

// isInboxStatement reports whether stmt is one of outbox_inbox's.
func isInboxStatement(stmt string) bool { return inboxStatement.MatchString(stmt) }

// InboxMigrations are the outbox_inbox statements of d's migrations, per
// version, for a consumer's database that needs only the inbox. Versions
// without such statements are left out.
func InboxMigrations(d Dialect) ([]Migration, error) {
	ms, err := Migrations(d)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, m := range ms {
		var stmts []string
		for _, stmt := range SplitStatements(m.SQL) {
			if isInboxStatement(stmt) {
				stmts = append(stmts, stmt+";")
			}
		}
		if len(stmts) > 0 {
			out = append(out, Migration{Version: m.Version, Name: m.Name + " (inbox)", SQL: strings.Join(stmts, "\n")})
		}
	}
	return out, nil
}

func inboxMigrationsTableSQL(d Dialect) string {
	return strings.Replace(migrationsTableSQL(d), "outbox_schema_migrations", inboxMigrationsTable, 1)
}

// InboxSchemaSQL is the inbox-only schema of d, ready for a user's own
// migration tool: outbox_inbox and the record that lets a later full
// `outbox migrate` on the same database skip it.
func InboxSchemaSQL(d Dialect) (string, error) {
	ms, err := InboxMigrations(d)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(inboxMigrationsTableSQL(d) + ";\n\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "-- migration %s\n%s\n", m.Name, strings.TrimSpace(m.SQL))
		fmt.Fprintf(&b, "INSERT INTO %s (version) VALUES (%d);\n\n", inboxMigrationsTable, m.Version)
	}
	return b.String(), nil
}

// MigrateInbox creates or upgrades outbox_inbox alone, for a consumer's
// database that holds no outbox, and returns the versions it applied.
// It records them in outbox_inbox_migrations, so that a later Migrate on
// the same database creates the rest of the schema and skips the inbox
// statements already applied. Versions Migrate applied are skipped too.
// Concurrent callers (of either) are serialised by the migrations lock.
func MigrateInbox(ctx context.Context, d Dialect, s Session) ([]int, error) {
	ms, err := InboxMigrations(d)
	if err != nil {
		return nil, err
	}
	if _, err := s.Exec(ctx, inboxMigrationsTableSQL(d)); err != nil {
		return nil, fmt.Errorf("create %s: %w", inboxMigrationsTable, err)
	}
	unlock, err := lockMigrations(ctx, d, s)
	if err != nil {
		return nil, err
	}
	defer unlock()
	full, err := appliedVersions(ctx, d, s, "outbox_schema_migrations")
	if err != nil {
		return nil, err
	}
	inboxOnly, err := appliedVersions(ctx, d, s, inboxMigrationsTable)
	if err != nil {
		return nil, err
	}
	var done []int
	for _, m := range ms {
		if full[m.Version] || inboxOnly[m.Version] {
			continue
		}
		err := s.InTx(ctx, func(q Querier) error {
			for _, stmt := range SplitStatements(m.SQL) {
				if _, err := q.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("migration %s: %w", m.Name, err)
				}
			}
			_, err := q.Exec(ctx, "INSERT INTO "+inboxMigrationsTable+" (version) VALUES ("+dialectOf(d).ph(1)+")", m.Version)
			return err
		})
		if err != nil {
			return done, err
		}
		done = append(done, m.Version)
	}
	return done, nil
}

// appliedVersions are the versions recorded in table, none when the table
// does not exist.
func appliedVersions(ctx context.Context, d Dialect, q Querier, table string) (map[int]bool, error) {
	n, err := queryInt(ctx, q, dialectOf(d).statements().tableExists, table)
	if err != nil {
		return nil, fmt.Errorf("look for %s: %w", table, err)
	}
	out := map[int]bool{}
	if n == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, "SELECT version FROM "+table)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out[v] = true
	}
	return out, rows.Err()
}

func queryInt(ctx context.Context, q Querier, sql string, args ...any) (int, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, err
		}
	}
	return n, rows.Err()
}
