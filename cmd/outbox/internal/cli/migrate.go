package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

func migrateCommand() *command {
	return &command{
		name:     "migrate",
		synopsis: "[--db URL] [--config FILE] [--inbox-only | --partitioned | --read-path snapshot|table]",
		summary:  "create or upgrade the outbox tables (idempotent)",
		about: `Creates or upgrades the outbox tables (outbox_messages, outbox_inbox and
the relays' bookkeeping) and prints the versions it applied, or that the
schema is up to date. Safe to run again and from several processes at once.

With --inbox-only, creates only outbox_inbox (and its bookkeeping table
outbox_inbox_migrations), for a consumer's database that holds no outbox.
A full 'outbox migrate' on that database later adds the rest.

With --partitioned (PostgreSQL only), creates outbox_messages partitioned
by day, so that the relay's retention drops whole days instead of deleting
rows (docs/retention.md). It applies when the table is created; an existing
unpartitioned table is left as it is, with an error.

With --read-path snapshot (PostgreSQL, a table not partitioned), also
enables the snapshot read: relays read new messages between transaction
snapshots and write nothing for one they delivered (docs/snapshot-read.md).
Every relay on the database then needs --read-path snapshot. With
--read-path table, turns it off again once every relay on the database is
stopped: the messages it delivered are marked sent, its column, cursors
and functions dropped; relays then run with the table read.

Migrations hold a session-level lock, which a connection pooler in
transaction mode (PgBouncer) does not keep: through one, migrate refuses
(exit 2); give it the server's own address.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			inboxOnly := fs.Bool("inbox-only", false, "create only the consumers' outbox_inbox table")
			partitioned := fs.Bool("partitioned", false, "create outbox_messages partitioned by day (PostgreSQL)")
			readPath := fs.String("read-path", "", "`PATH`: snapshot enables the relays' snapshot read, table turns it off with every relay stopped (PostgreSQL; docs/snapshot-read.md)")
			return func(e *env, pos []string) error {
				if len(pos) > 0 && pos[0] == "sql" {
					return usagef("migrate: put 'sql' right after 'migrate': outbox migrate sql --dialect …")
				}
				if err := noArgs("migrate", pos); err != nil {
					return err
				}
				switch {
				case *readPath != "" && *readPath != "snapshot" && *readPath != "table":
					return usagef("migrate: --read-path %q: snapshot (turn the snapshot read on) or table (turn it off)", *readPath)
				case *readPath != "" && (*inboxOnly || *partitioned):
					return usagef("migrate: --read-path does not go with --inbox-only or --partitioned")
				}
				if *inboxOnly && *partitioned {
					return usagef("migrate: --inbox-only and --partitioned do not go together: the inbox is not partitioned")
				}
				db, _, err := e.openDB(df)
				if err != nil {
					return err
				}
				defer db.Close()
				if db.Pooler {
					return usagef("migrate: --db leads to a connection pooler (PgBouncer), where the lock that serialises migrations does not hold: run migrate against the PostgreSQL server itself")
				}
				if *inboxOnly {
					return e.migrateInbox(db)
				}
				if *partitioned && db.Dialect != store.Postgres {
					return usagef("migrate: --partitioned needs PostgreSQL, not %s", db.Dialect)
				}
				if *readPath == "snapshot" && db.Dialect != store.Postgres {
					return usagef("migrate: --read-path snapshot needs PostgreSQL, not %s", db.Dialect)
				}
				if err := e.migrate(db, &outbox.MigrateOpts{Partitioned: *partitioned, SnapshotRead: *readPath == "snapshot"}); err != nil || *readPath != "table" {
					return err
				}
				return e.tableRead(db)
			}
		},
	}
}

func (e *env) migrate(db *dburl.DB, opts *outbox.MigrateOpts) error {
	applied, err := db.Migrate(e.ctx, opts)
	if err != nil {
		return err
	}
	version, err := store.SchemaVersion(e.ctx, db.Backend().Store.DB())
	if err != nil {
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	if len(applied) == 0 {
		fmt.Fprintf(e.stdout, "outbox schema is up to date (version %d, %s)\n", version, db.Dialect)
		return nil
	}
	vs := make([]string, len(applied))
	for i, v := range applied {
		vs[i] = strconv.Itoa(v)
	}
	noun := "migration"
	if len(applied) > 1 {
		noun = "migrations"
	}
	fmt.Fprintf(e.stdout, "applied %s %s; outbox schema is at version %d (%s)\n", noun, strings.Join(vs, ", "), version, db.Dialect)
	return nil
}

// tableRead turns the snapshot read off, if it is on.
func (e *env) tableRead(db *dburl.DB) error {
	st := db.Backend().Store
	if on, err := st.SnapshotReadEnabled(e.ctx); err != nil || !on {
		if err == nil {
			fmt.Fprintln(e.stdout, "relays read by status already (the table read)")
		}
		return err
	}
	sent, err := st.DisableSnapshotRead(e.ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintf(e.stdout, "the snapshot read is off: %d delivered messages marked sent; run the relays with --read-path table\n", sent)
	return nil
}

// migrateInbox creates or upgrades outbox_inbox alone.
func (e *env) migrateInbox(db *dburl.DB) error {
	s, err := db.Backend().Session(e.ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer s.Close()
	applied, err := store.MigrateInbox(e.ctx, db.Dialect, s)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if len(applied) == 0 {
		fmt.Fprintf(e.stdout, "outbox_inbox is up to date (%s)\n", db.Dialect)
		return nil
	}
	vs := make([]string, len(applied))
	for i, v := range applied {
		vs[i] = strconv.Itoa(v)
	}
	fmt.Fprintf(e.stdout, "applied the inbox part of migration %s; outbox_inbox is ready (%s)\n", strings.Join(vs, ", "), db.Dialect)
	return nil
}

func migrateSQLCommand() *command {
	return &command{
		name:     "migrate sql",
		synopsis: "--dialect postgres|mysql|sqlite [--inbox-only | --partitioned | --read-path snapshot] [--from N] [--format goose|golang-migrate|atlas --out DIR [--start N]]",
		summary:  "print the schema SQL, or write it as versioned files for your migration tool",
		about: `Prints the complete outbox schema for one database, for teams that apply
migrations with their own tool. Needs no database connection. Without
--dialect, the dialect is taken from --db or OUTBOX_DATABASE_URL.
With --inbox-only, prints only what 'outbox migrate --inbox-only' applies;
with --partitioned, the schema 'outbox migrate --partitioned' creates;
with --read-path snapshot (PostgreSQL), the schema followed by the step
'outbox migrate --read-path snapshot' applies (idempotent; with --from
the newest version, the step alone). With --from N, only what a schema at outbox version N lacks ('outbox
status' and the table outbox_schema_migrations show the version).

With --format goose, golang-migrate or atlas and --out DIR, writes one
versioned file per outbox schema version into DIR instead (goose: Up and
Down sections in one file; golang-migrate: .up.sql and .down.sql; atlas:
the files and atlas.sum), numbered from --start (default 1) so that they
follow your own migrations. Each file also records its version in
outbox_schema_migrations, so the relay sees the schema your tool applied.
Upgrading the outbox later: --from the version you have, --start the next
free number. Files that exist in DIR are never overwritten.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var o migrateSQLOpts
			fs.StringVar(&o.dialect, "dialect", "", "`DIALECT`: postgres, mysql (MariaDB too) or sqlite")
			fs.StringVar(&o.db, "db", "", "database `URL` whose dialect to use when --dialect is not given")
			fs.BoolVar(&o.inboxOnly, "inbox-only", false, "print only the consumers' outbox_inbox table")
			fs.BoolVar(&o.partitioned, "partitioned", false, "print the schema with outbox_messages partitioned by day (PostgreSQL)")
			fs.StringVar(&o.readPath, "read-path", "", "`snapshot`: also print the step that enables the relays' snapshot read (PostgreSQL; docs/snapshot-read.md)")
			fs.IntVar(&o.from, "from", 0, "only what a schema at outbox version `N` lacks (0: everything)")
			fs.StringVar(&o.format, "format", "", "write versioned files for `TOOL`: goose, golang-migrate or atlas (with --out)")
			fs.StringVar(&o.out, "out", "", "`DIR` to write the --format files into (created if missing)")
			fs.IntVar(&o.start, "start", 1, "number of the first file written with --format: the `N` after your newest migration")
			return func(e *env, pos []string) error {
				if err := noArgs("migrate sql", pos); err != nil {
					return err
				}
				return e.migrateSQL(o)
			}
		},
	}
}

// migrateSQLOpts are the flags of migrate sql.
type migrateSQLOpts struct {
	dialect, db, format, out string
	readPath                 string
	inboxOnly, partitioned   bool
	from, start              int
}

func (e *env) migrateSQL(o migrateSQLOpts) error {
	if o.inboxOnly && o.partitioned {
		return usagef("migrate sql: --inbox-only and --partitioned do not go together: the inbox is not partitioned")
	}
	if (o.format == "") != (o.out == "") {
		return usagef("migrate sql: --format and --out go together: --format TOOL --out DIR")
	}
	if o.inboxOnly && (o.format != "" || o.from != 0) {
		return usagef("migrate sql: --inbox-only prints the inbox table alone; --format and --from apply to the whole schema")
	}
	switch {
	case o.readPath != "" && o.readPath != "snapshot":
		return usagef("migrate sql: --read-path %q: the one read path to enable is snapshot", o.readPath)
	case o.readPath != "" && (o.inboxOnly || o.partitioned):
		return usagef("migrate sql: --read-path snapshot does not go with --inbox-only or --partitioned")
	case o.readPath != "" && o.format != "":
		return usagef("migrate sql: --read-path snapshot is not a versioned migration: print it without --format and apply it as one of your own (it may run again)")
	}
	if o.dialect == "" {
		raw := o.db
		if raw == "" {
			raw = e.getenv("OUTBOX_DATABASE_URL")
		}
		if raw == "" {
			return usagef("migrate sql: --dialect is required (postgres, mysql or sqlite)")
		}
		e.addSecret(passwordOf(raw))
		d, _, err := dburl.Parse(raw)
		if err != nil {
			return asUsage(err)
		}
		o.dialect = string(d)
	}
	d, err := store.ParseDialect(o.dialect)
	if err != nil {
		return usagef("migrate sql: --dialect: %v", errorLine(err))
	}
	if o.partitioned && d != store.Postgres {
		return usagef("migrate sql: --partitioned needs PostgreSQL, not %s", d)
	}
	if o.readPath != "" && d != store.Postgres {
		return usagef("migrate sql: --read-path snapshot needs PostgreSQL, not %s", d)
	}
	layout := store.MigrateOptions{Partitioned: o.partitioned}
	if o.format != "" {
		return e.writeToolFiles(d, layout, o)
	}
	var sql string
	if o.inboxOnly {
		sql, err = store.InboxSchemaSQL(d)
	} else {
		sql, err = store.SchemaSQLAfter(d, layout, o.from)
	}
	if err == nil && o.readPath != "" {
		var step string
		step, err = store.SnapshotSQL()
		sql += "\n-- The snapshot read (outbox migrate --read-path snapshot; docs/snapshot-read.md).\n" + step
	}
	if err != nil {
		return usagef("migrate sql: %v", errorLine(err))
	}
	fmt.Fprint(e.stdout, sql)
	return nil
}

// writeToolFiles writes the migration tool's files into o.out, refusing
// to overwrite any.
func (e *env) writeToolFiles(d store.Dialect, layout store.MigrateOptions, o migrateSQLOpts) error {
	format, err := store.ParseToolFormat(o.format)
	if err != nil {
		return usagef("migrate sql: --format: %v", err)
	}
	files, err := store.ToolFiles(d, layout, format, o.from, o.start)
	if err != nil {
		return usagef("migrate sql: %v", errorLine(err))
	}
	if len(files) == 0 {
		fmt.Fprintf(e.stdout, "nothing to write: version %d is the newest outbox schema\n", o.from)
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("migrate sql: --out: %w", err)
	}
	for _, f := range files {
		path := filepath.Join(o.out, f.Name)
		if f.Name == "atlas.sum" {
			if _, err := os.Stat(path); err == nil {
				return fmt.Errorf("migrate sql: %s exists: atlas.sum covers the whole directory, so write atlas files into a new directory and let 'atlas migrate hash' merge them", path)
			}
		}
		fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("migrate sql: %w", err)
		}
		_, err = fh.WriteString(f.Content)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("migrate sql: %w", err)
		}
		fmt.Fprintln(e.stdout, path)
	}
	return nil
}
