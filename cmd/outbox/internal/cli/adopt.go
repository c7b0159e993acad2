package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/internal/adopt"
	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/adopt/adoptyaml"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

// adoptUsage is the --adopt flag's help.
const adoptUsage = "an existing local message table instead of outbox_messages, by `PROFILE`: laravel, spring or codes, or a FILE.yaml mapping (docs/adopt.md)"

// adoptAbout is the paragraph the help of the commands with --adopt shares.
const adoptAbout = `With --adopt PROFILE (laravel, spring, codes) or --adopt FILE.yaml, the
command works on a local message table the application already writes
instead of outbox_messages (docs/adopt.md); 'outbox migrate' must have
made the relay's own tables in the same database.`

// loadProfile loads the --adopt profile; a bad one is a usage error.
func loadProfile(spec string) (*adopt.Profile, error) {
	p, err := adoptyaml.Load(spec)
	if err != nil {
		return nil, asUsage(err)
	}
	return p, nil
}

// adoptedStore is the store over the table of the profile spec in db.
func adoptedStore(db *dburl.DB, spec string) (*adoptstore.Store, error) {
	p, err := loadProfile(spec)
	if err != nil {
		return nil, err
	}
	a, err := adoptstore.New(db.Backend().Store, p)
	if err != nil {
		return nil, asUsage(err)
	}
	return a, nil
}

// openAdopted checks the profile spec, then opens the database df names
// and the store over the profile's table in it. The caller closes db.
func (e *env) openAdopted(df dbFlags, spec string) (*dburl.DB, *adoptstore.Store, error) {
	if _, err := loadProfile(spec); err != nil {
		return nil, nil, err
	}
	db, _, err := e.openDB(df)
	if err != nil {
		return nil, nil, err
	}
	a, err := adoptedStore(db, spec)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, a, nil
}

// newRelay builds the relay of rc over db, reading p's table when p is not
// nil.
func newRelay(db *dburl.DB, p *adopt.Profile, rc *outbox.RelayConfig) (*outbox.Relay, error) {
	if db.PGX != nil {
		return outbox.NewRelay(store.Adopting(db.PGX, p), rc)
	}
	return outbox.NewRelay(store.Adopting(db.Std, p), rc)
}

// fleetDriver is db for a fleet, reading p's table when p is not nil and
// following feed when it is not nil.
func fleetDriver(db *dburl.DB, p *adopt.Profile, feed driver.ChangeFeed) (outbox.FleetDriver, error) {
	if db.PGX != nil {
		return outbox.FleetDriverOf(store.Adopting(store.Following(db.PGX, feed), p))
	}
	return outbox.FleetDriverOf(store.Adopting(store.Following(db.Std, feed), p))
}

// adoptProfile loads the profile of relay --adopt spec, checking that the
// relay's configuration goes with an adopted table; nil for no spec.
func adoptProfile(spec string, rc *outbox.RelayConfig) (*adopt.Profile, error) {
	if spec == "" {
		return nil, nil
	}
	p, err := loadProfile(spec)
	if err != nil {
		return nil, err
	}
	if rc.Retention != nil {
		return nil, usagef("relay: --adopt does not go with retention: the application owns the rows of its table")
	}
	return p, nil
}

func adoptCheckCommand() *command {
	return &command{
		name:     "adopt check",
		synopsis: "--adopt PROFILE|FILE.yaml [--db URL]",
		summary:  "say whether an existing local message table fits a profile",
		about: `Compares a local message table the application already writes with a
profile (laravel, spring, codes, or a FILE.yaml mapping; docs/adopt.md):
every column the profile names must exist with a usable type, and the
indexes the relay's read wants should exist. Prints what is missing and
exits 1 when anything is; 'outbox adopt sql' prints the indexes.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			spec := fs.String("adopt", "", adoptUsage)
			return func(e *env, pos []string) error {
				if err := noArgs("adopt check", pos); err != nil {
					return err
				}
				if *spec == "" {
					return usagef("adopt check: --adopt PROFILE is required (laravel, spring, codes or FILE.yaml)")
				}
				db, a, err := e.openAdopted(df, *spec)
				if err != nil {
					return err
				}
				defer db.Close()
				p := a.Profile()
				r, err := a.Check(e.ctx)
				if err != nil {
					return fmt.Errorf("adopt check: %w", err)
				}
				for _, line := range r.Problems() {
					fmt.Fprintf(e.stdout, "%s: %s\n", p.Table, line)
				}
				for _, ix := range r.MissingIndexes {
					fmt.Fprintf(e.stdout, "%s: no index on (%s): %s (outbox adopt sql prints it)\n", p.Table, strings.Join(ix.Columns, ", "), ix.Why)
				}
				if !r.Fits() {
					return exitCode(ExitFailure)
				}
				fmt.Fprintf(e.stdout, "%s fits profile %s (%s)\n", p.Table, p.Name, db.Dialect)
				return nil
			}
		},
	}
}

func adoptSQLCommand() *command {
	return &command{
		name:     "adopt sql",
		synopsis: "--adopt PROFILE|FILE.yaml --dialect postgres|mysql|sqlite",
		summary:  "print the indexes the relay wants on an existing local message table",
		about: `Prints the purely additive DDL the relay recommends on a local message
table (its read finds due rows by status and next attempt, and a key's
earlier rows): CREATE INDEX statements, never a change to an existing
column. Needs no database connection; 'outbox adopt check' says which of
them a table lacks.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			spec := fs.String("adopt", "", adoptUsage)
			dialect := fs.String("dialect", "", "`DIALECT`: postgres, mysql (MariaDB too) or sqlite")
			return func(e *env, pos []string) error {
				if err := noArgs("adopt sql", pos); err != nil {
					return err
				}
				if *spec == "" || *dialect == "" {
					return usagef("adopt sql: --adopt PROFILE and --dialect are required")
				}
				p, err := loadProfile(*spec)
				if err != nil {
					return err
				}
				d, err := store.ParseDialect(*dialect)
				if err != nil {
					return asUsage(fmt.Errorf("adopt sql: %w", err))
				}
				fmt.Fprint(e.stdout, adoptstore.SQL(d, p, nil))
				return nil
			}
		},
	}
}

// statusSource is what `outbox status` reads: outbox_messages' store or
// an adopted table's.
type statusSource interface {
	Stats(ctx context.Context) (store.Stats, error)
	RouteHealth(ctx context.Context) ([]store.RouteHealth, error)
}

// statusSourceOf is the store `outbox status` reads: the adopted table's
// when spec names one.
func statusSourceOf(ctx context.Context, db *dburl.DB, spec string) (statusSource, error) {
	if spec == "" {
		return asRelaysSee(ctx, db.Backend().Store)
	}
	return adoptedStore(db, spec)
}

// asRelaysSee is st as the relays see outbox_messages: on a database read
// by snapshots, a delivered message (still pending in its row) is sent,
// for the counts, the lists and the guards of every change.
func asRelaysSee(ctx context.Context, st *store.Store) (*store.Store, error) {
	on, err := st.SnapshotReadEnabled(ctx)
	if on {
		st = st.WithSnapshotRead()
	}
	return st, err
}

// listDead lists dead messages: of outbox_messages, or of the adopted
// table spec names.
func (e *env) listDead(db *dburl.DB, spec string, f store.Filter) ([]store.Message, error) {
	if spec == "" {
		st, err := asRelaysSee(e.ctx, db.Backend().Store)
		if err != nil {
			return nil, err
		}
		return st.List(e.ctx, f)
	}
	a, err := adoptedStore(db, spec)
	if err != nil {
		return nil, err
	}
	return a.ListDead(e.ctx, f.Topic, f.Limit)
}

// adoptedBulk runs `dead requeue --adopt`: the table's dead rows of the
// selection go back to its pending status with their attempts reset.
// Message ids are the table's (or the derived ones `dead list` shows),
// any text. Discarding is refused: the application owns its rows.
func (e *env) adoptedBulk(df dbFlags, spec, full, verb, past string, action store.BulkAction, topic string, ids []string, dryRun bool) error {
	if action != store.ActionRequeue {
		return usagef("%s: --adopt: only requeue works on an adopted table; its application owns its rows", full)
	}
	db, a, err := e.openAdopted(df, spec)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := a.DeadRows(e.ctx, topic, ids)
	if err != nil {
		return fmt.Errorf("%s: %w", full, err)
	}
	n := int64(len(rows))
	if !dryRun && n > 0 {
		if n, err = a.RequeueRows(e.ctx, rows); err != nil {
			return fmt.Errorf("%s: stopped after %s %d: %w", full, past, n, err)
		}
		if b := db.Backend(); b.Notify != nil {
			_ = b.Notify(context.WithoutCancel(e.ctx))
		}
	}
	return e.reportBulk(full, verb, past, "dead", ids, n, dryRun)
}
