package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

func migrateCommand() *command {
	return &command{
		name:     "migrate",
		synopsis: "[--db URL] [--config FILE] [--inbox-only | --partitioned]",
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
unpartitioned table is left as it is, with an error.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			inboxOnly := fs.Bool("inbox-only", false, "create only the consumers' outbox_inbox table")
			partitioned := fs.Bool("partitioned", false, "create outbox_messages partitioned by day (PostgreSQL)")
			return func(e *env, pos []string) error {
				if len(pos) > 0 && pos[0] == "sql" {
					return usagef("migrate: put 'sql' right after 'migrate': outbox migrate sql --dialect …")
				}
				if err := noArgs("migrate", pos); err != nil {
					return err
				}
				if *inboxOnly && *partitioned {
					return usagef("migrate: --inbox-only and --partitioned do not go together: the inbox is not partitioned")
				}
				db, _, err := e.openDB(df)
				if err != nil {
					return err
				}
				defer db.Close()
				if *inboxOnly {
					return e.migrateInbox(db)
				}
				if *partitioned && db.Dialect != store.Postgres {
					return usagef("migrate: --partitioned needs PostgreSQL, not %s", db.Dialect)
				}
				return e.migrate(db, &outbox.MigrateOpts{Partitioned: *partitioned})
			}
		},
	}
}

func (e *env) migrate(db *dburl.DB, opts *outbox.MigrateOpts) error {
	var applied []int
	var err error
	if db.PGX != nil {
		applied, err = outbox.Migrate(e.ctx, db.PGX, opts)
	} else {
		applied, err = outbox.Migrate(e.ctx, db.Std, opts)
	}
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
		synopsis: "--dialect postgres|mysql|sqlite [--inbox-only | --partitioned]",
		summary:  "print the schema SQL for your own migration tool",
		about: `Prints the complete outbox schema for one database, for teams that apply
migrations with their own tool. Needs no database connection. Without
--dialect, the dialect is taken from --db or OUTBOX_DATABASE_URL.
With --inbox-only, prints only what 'outbox migrate --inbox-only' applies;
with --partitioned, the schema 'outbox migrate --partitioned' creates.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var dialect, dbFlag string
			var inboxOnly, partitioned bool
			fs.StringVar(&dialect, "dialect", "", "`DIALECT`: postgres, mysql (MariaDB too) or sqlite")
			fs.StringVar(&dbFlag, "db", "", "database `URL` whose dialect to use when --dialect is not given")
			fs.BoolVar(&inboxOnly, "inbox-only", false, "print only the consumers' outbox_inbox table")
			fs.BoolVar(&partitioned, "partitioned", false, "print the schema with outbox_messages partitioned by day (PostgreSQL)")
			return func(e *env, pos []string) error {
				if err := noArgs("migrate sql", pos); err != nil {
					return err
				}
				if inboxOnly && partitioned {
					return usagef("migrate sql: --inbox-only and --partitioned do not go together: the inbox is not partitioned")
				}
				if dialect == "" {
					raw := dbFlag
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
					dialect = string(d)
				}
				var sql string
				var err error
				if inboxOnly {
					var d store.Dialect
					if d, err = store.ParseDialect(dialect); err == nil {
						sql, err = store.InboxSchemaSQL(d)
					}
				} else {
					sql, err = outbox.SchemaSQL(driver.Dialect(dialect), &outbox.MigrateOpts{Partitioned: partitioned})
				}
				if err != nil {
					return usagef("migrate sql: --dialect: %v", errorLine(err))
				}
				fmt.Fprint(e.stdout, sql)
				return nil
			}
		},
	}
}
