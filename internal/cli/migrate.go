package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

func migrateCommand() *command {
	return &command{
		name:     "migrate",
		synopsis: "[--db URL] [--config FILE]",
		summary:  "create or upgrade the outbox tables (idempotent)",
		about: `Creates or upgrades the outbox tables (outbox_messages, outbox_inbox and
the relays' bookkeeping) and prints the versions it applied, or that the
schema is up to date. Safe to run again and from several processes at once.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			return func(e *env, pos []string) error {
				if len(pos) > 0 && pos[0] == "sql" {
					return usagef("migrate: put 'sql' right after 'migrate': outbox migrate sql --dialect …")
				}
				if err := noArgs("migrate", pos); err != nil {
					return err
				}
				db, _, err := e.openDB(df)
				if err != nil {
					return err
				}
				defer db.Close()
				return e.migrate(db)
			}
		},
	}
}

func (e *env) migrate(db *dburl.DB) error {
	var applied []int
	var err error
	if db.PGX != nil {
		applied, err = outbox.Migrate(e.ctx, db.PGX)
	} else {
		applied, err = outbox.Migrate(e.ctx, db.Std)
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

func migrateSQLCommand() *command {
	return &command{
		name:     "migrate sql",
		synopsis: "--dialect postgres|mysql|sqlite",
		summary:  "print the schema SQL for your own migration tool",
		about: `Prints the complete outbox schema for one database, for teams that apply
migrations with their own tool. Needs no database connection. Without
--dialect, the dialect is taken from --db or OUTBOX_DATABASE_URL.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var dialect, dbFlag string
			fs.StringVar(&dialect, "dialect", "", "`DIALECT`: postgres, mysql (MariaDB too) or sqlite")
			fs.StringVar(&dbFlag, "db", "", "database `URL` whose dialect to use when --dialect is not given")
			return func(e *env, pos []string) error {
				if err := noArgs("migrate sql", pos); err != nil {
					return err
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
				sql, err := outbox.SchemaSQL(dialect)
				if err != nil {
					return usagef("migrate sql: --dialect: %v", errorLine(err))
				}
				fmt.Fprint(e.stdout, sql)
				return nil
			}
		},
	}
}
