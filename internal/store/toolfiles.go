package store

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
)

// ToolFormat is a migration tool whose directory layout ToolFiles writes.
type ToolFormat string

// The migration tools ToolFiles writes for.
const (
	// Goose: one NNNNN_outbox_NAME.sql a version, with +goose Up and
	// +goose Down sections (github.com/pressly/goose).
	Goose ToolFormat = "goose"
	// GolangMigrate: NNNNN_outbox_NAME.up.sql and .down.sql a version
	// (github.com/golang-migrate/migrate). On MySQL its DSN needs
	// multiStatements=true: a file holds several statements.
	GolangMigrate ToolFormat = "golang-migrate"
	// Atlas: NNNNN_outbox_NAME.sql a version and the directory's
	// atlas.sum (atlas's versioned migrations; it plans its own downs).
	Atlas ToolFormat = "atlas"
)

// ToolFormats lists the formats, for help texts and errors.
var ToolFormats = []ToolFormat{Goose, GolangMigrate, Atlas}

// ParseToolFormat returns the format named s.
func ParseToolFormat(s string) (ToolFormat, error) {
	for _, f := range ToolFormats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown migration tool format %q: want goose, golang-migrate or atlas", s)
}

// ToolFile is one file of a migration tool's directory.
type ToolFile struct {
	Name    string
	Content string
}

// ToolFiles renders the migrations of d (layout o) that a schema at
// version from lacks, one versioned file (or up/down pair) each, for the
// migration tool format. The tool's file numbers start at start, so the
// files can follow the application's own migrations; each file also
// records its outbox version in outbox_schema_migrations, so the relay
// and `outbox migrate` see the schema the tool applied.
func ToolFiles(d Dialect, o MigrateOptions, format ToolFormat, from, start int) ([]ToolFile, error) {
	if _, err := ParseToolFormat(string(format)); err != nil {
		return nil, err
	}
	if start < 1 {
		return nil, fmt.Errorf("the first file number must be at least 1, not %d", start)
	}
	ms, err := MigrationsAfter(d, o, from)
	if err != nil {
		return nil, err
	}
	var files []ToolFile
	for i, m := range ms {
		base := fmt.Sprintf("%05d_outbox_%s", start+i, strings.TrimLeft(strings.TrimLeft(m.Name, "0123456789"), "_"))
		header := fmt.Sprintf("-- outbox schema version %d (%s), from `outbox migrate sql --format %s`.\n", m.Version, d, format)
		up, down := toolUp(d, m), toolDown(d, m)
		switch format {
		case Goose:
			files = append(files, ToolFile{base + ".sql", header + "\n-- +goose Up\n" + gooseStatements(up) + "\n-- +goose Down\n" + gooseStatements(down)})
		case GolangMigrate:
			files = append(files,
				ToolFile{base + ".up.sql", header + "\n" + strings.Join(up, ";\n\n") + ";\n"},
				ToolFile{base + ".down.sql", header + "\n" + strings.Join(down, ";\n\n") + ";\n"})
		case Atlas:
			files = append(files, ToolFile{base + ".sql", atlasFile(header, up)})
		}
	}
	if format == Atlas && len(files) > 0 {
		files = append(files, ToolFile{"atlas.sum", atlasSum(files)})
	}
	return files, nil
}

// MigrationsAfter is d's migrations (layout o) above version from.
func MigrationsAfter(d Dialect, o MigrateOptions, from int) ([]Migration, error) {
	ms, err := MigrationsWith(d, o)
	if err != nil {
		return nil, err
	}
	if from < 0 || (len(ms) > 0 && from > ms[len(ms)-1].Version) {
		return nil, fmt.Errorf("no outbox schema version %d: versions go from 0 (empty) to %d", from, ms[len(ms)-1].Version)
	}
	out := ms[:0:0]
	for _, m := range ms {
		if m.Version > from {
			out = append(out, m)
		}
	}
	return out, nil
}

// toolUp is m's statements for a tool: the bookkeeping table (idempotent),
// the migration, and its version row.
func toolUp(d Dialect, m Migration) []string {
	up := []string{migrationsTableSQL(d)}
	up = append(up, SplitStatements(m.SQL)...)
	return append(up, fmt.Sprintf("INSERT INTO outbox_schema_migrations (version) VALUES (%d)", m.Version))
}

// toolDown undoes toolUp; undoing version 1 drops the bookkeeping table
// with the rest.
func toolDown(d Dialect, m Migration) []string {
	down := SplitStatements(m.Down)
	if m.Version == 1 {
		return append(down, "DROP TABLE IF EXISTS outbox_schema_migrations")
	}
	return append(down, fmt.Sprintf("DELETE FROM outbox_schema_migrations WHERE version = %d", m.Version))
}

// gooseStatements marks each statement off, so that goose runs function
// bodies with semicolons in them whole.
func gooseStatements(stmts []string) string {
	var b strings.Builder
	for _, s := range stmts {
		fmt.Fprintf(&b, "-- +goose StatementBegin\n%s;\n-- +goose StatementEnd\n", s)
	}
	return b.String()
}

// atlasDelimiter ends the statements of an atlas file that names it in
// an atlas:delimiter directive.
const atlasDelimiter = "-- end"

// atlasFile is an atlas migration file of stmts under header. Atlas
// splits a file at every semicolon outside quotes and dollar-quoted
// bodies, so a file with a SQLite trigger, whose body holds semicolons of
// its own, begins with an atlas:delimiter directive and ends each
// statement with atlasDelimiter instead. Every other file keeps the
// semicolons (and the checksums it always had).
func atlasFile(header string, stmts []string) string {
	if !slices.ContainsFunc(stmts, func(s string) bool { return strings.Contains(strings.ToUpper(s), "CREATE TRIGGER") }) {
		return header + "\n" + strings.Join(stmts, ";\n\n") + ";\n"
	}
	return "-- atlas:delimiter " + atlasDelimiter + "\n" + header + "\n" +
		strings.Join(stmts, "\n"+atlasDelimiter+"\n\n") + "\n" + atlasDelimiter + "\n"
}

// atlasSum is the atlas.sum of files: each file's hash is a running
// SHA-256 over every file name and content up to it, and the first line
// is the SHA-256 of all names and hashes.
func atlasSum(files []ToolFile) string {
	running, total := sha256.New(), sha256.New()
	var lines strings.Builder
	for _, f := range files {
		running.Write([]byte(f.Name))
		running.Write([]byte(f.Content))
		h := base64.StdEncoding.EncodeToString(running.Sum(nil))
		total.Write([]byte(f.Name))
		total.Write([]byte(h))
		fmt.Fprintf(&lines, "%s h1:%s\n", f.Name, h)
	}
	return "h1:" + base64.StdEncoding.EncodeToString(total.Sum(nil)) + "\n" + lines.String()
}
