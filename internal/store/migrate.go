package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations
var migrationFS embed.FS

// Migration is one versioned schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the dialect's migrations in version order.
func Migrations(d Dialect) ([]Migration, error) {
	dir := "migrations/" + string(d)
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
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
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// SchemaSQL is every migration of d, ready for a user's own migration tool.
func SchemaSQL(d Dialect) (string, error) {
	ms, err := Migrations(d)
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

func migrationsTableSQL(d Dialect) string {
	switch d {
	case Postgres:
		return "CREATE TABLE IF NOT EXISTS outbox_schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
	case MySQL:
		return "CREATE TABLE IF NOT EXISTS outbox_schema_migrations (version INT NOT NULL PRIMARY KEY, applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB"
	default:
		return "CREATE TABLE IF NOT EXISTS outbox_schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')))"
	}
}

// splitStatements splits a migration file at semicolons that end a line.
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
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
type Session interface {
	Querier
	// InTx runs fn in a transaction on this session.
	InTx(ctx context.Context, fn func(q Querier) error) error
	Close() error
}

// Migrate applies the migrations not yet applied and returns their
// versions. Concurrent callers are serialised by a database lock.
func Migrate(ctx context.Context, d Dialect, s Session) ([]int, error) {
	ms, err := Migrations(d)
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
	var done []int
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		err := s.InTx(ctx, func(q Querier) error {
			for _, stmt := range splitStatements(m.SQL) {
				if _, err := q.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("migration %s: %w", m.Name, err)
				}
			}
			_, err := q.Exec(ctx, "INSERT INTO outbox_schema_migrations (version) VALUES ("+d.ph(1)+")", m.Version)
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
	rows, err := q.Query(ctx, "SELECT coalesce(max(version), 0) FROM outbox_schema_migrations")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var v int
	if rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return 0, err
		}
	}
	return v, rows.Err()
}

func lockMigrations(ctx context.Context, d Dialect, s Session) (func(), error) {
	switch d {
	case Postgres:
		if _, err := s.Exec(ctx, "SELECT pg_advisory_lock(7433001)"); err != nil {
			return nil, fmt.Errorf("lock migrations: %w", err)
		}
		return func() { _, _ = s.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7433001)") }, nil
	case MySQL:
		rows, err := s.Query(ctx, "SELECT GET_LOCK('outbox_migrate', 60)")
		if err != nil {
			return nil, fmt.Errorf("lock migrations: %w", err)
		}
		var got *int
		if rows.Next() {
			_ = rows.Scan(&got)
		}
		rows.Close()
		if got == nil || *got != 1 {
			return nil, fmt.Errorf("lock migrations: another migration holds the lock")
		}
		return func() {
			if r, err := s.Query(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK('outbox_migrate')"); err == nil {
				r.Close()
			}
		}, nil
	}
	return func() {}, nil
}
