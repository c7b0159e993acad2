package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/internal/store"
)

// dbFlags are the flags of every command that reads the database.
type dbFlags struct {
	db     string
	config string
	// list is every --db of a command that takes several (registerMany).
	list listFlag
}

func (f *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.db, "db", "", "database `URL` (default $OUTBOX_DATABASE_URL, then the config file's database)")
	fs.StringVar(&f.config, "config", "", "YAML config `FILE` (default $OUTBOX_CONFIG)")
}

// registerMany declares --db as repeatable, for a command that serves
// several databases.
func (f *dbFlags) registerMany(fs *flag.FlagSet) {
	fs.Var(&f.list, "db", "database `URL`; repeat it to serve several (default $OUTBOX_DATABASE_URL, then the config file's database)")
	fs.StringVar(&f.config, "config", "", "YAML config `FILE` (default $OUTBOX_CONFIG)")
}

// passwordOf returns the password in a URL or connection string, "" when
// none.
func passwordOf(raw string) string { return redact.Password(raw) }

// secretFlags are the flags whose values may carry a password, and where
// the value can come from instead, out of sight of other users.
var secretFlags = []struct{ name, instead string }{
	{"db", "OUTBOX_DATABASE_URL or the config file's database"},
	{"to", "OUTBOX_TO or the config file's to"},
	{"route", "the config file's routes"},
	{"alert-webhook", "OUTBOX_ALERT_WEBHOOK"},
}

// warnSecretFlags warns once when a flag given on the command line holds
// a password: the command line is visible to every user of the machine
// (ps, /proc). The password itself is recorded as a secret, never printed.
func (e *env) warnSecretFlags(fs *flag.FlagSet) {
	set := setFlags(fs)
	warned := false
	for _, sf := range secretFlags {
		f := fs.Lookup(sf.name)
		if f == nil || !set[sf.name] {
			continue
		}
		vals := []string{f.Value.String()}
		if l, ok := f.Value.(*listFlag); ok {
			vals = *l
		}
		for _, v := range vals {
			if sf.name == "route" {
				_, v, _ = strings.Cut(v, "=")
			}
			pw := passwordOf(v)
			if pw == "" {
				continue
			}
			e.addSecret(pw)
			if !warned {
				warned = true
				fmt.Fprintf(e.stderr, "outbox: warning: --%s holds a password, which any user of this machine can read from the process list; give it in %s instead\n", sf.name, sf.instead)
			}
		}
	}
}

// databaseURL resolves the database URL: --db, then OUTBOX_DATABASE_URL,
// then the config file.
func (e *env) databaseURL(f dbFlags, cfg *fileConfig) (string, error) {
	raw := f.db
	if raw == "" && len(f.list) > 0 {
		raw = f.list[0]
	}
	if raw == "" {
		raw = e.getenv("OUTBOX_DATABASE_URL")
	}
	if raw == "" && cfg != nil {
		raw = cfg.Database
	}
	if raw == "" {
		return "", usagef("no database: pass --db URL or set OUTBOX_DATABASE_URL (postgres://…, mysql://…, sqlite://…)")
	}
	e.addSecret(passwordOf(raw))
	return raw, nil
}

// openDB loads the config file and opens the database the flags, the
// environment or the config name. The caller closes the database.
func (e *env) openDB(f dbFlags) (*dburl.DB, *fileConfig, error) {
	cfg, err := e.loadConfig(f.config)
	if err != nil {
		return nil, nil, err
	}
	raw, err := e.databaseURL(f, cfg)
	if err != nil {
		return nil, nil, err
	}
	db, err := e.dial(raw)
	if err != nil {
		return nil, nil, err
	}
	return db, cfg, nil
}

// dial opens the database at raw; a malformed URL is a usage error.
func (e *env) dial(raw string) (*dburl.DB, error) {
	db, err := dburl.Open(e.ctx, raw)
	if err != nil {
		if errors.Is(err, dburl.ErrBadURL) {
			return nil, asUsage(err)
		}
		return nil, err
	}
	return db, nil
}

// dialInstalled opens the database the flags, the environment or the
// config name, for a command (what) that serves it until stopped, and
// fails with schemaHint's advice unless the outbox tables are installed.
// The caller closes the database.
func (e *env) dialInstalled(f dbFlags, cfg *fileConfig, what string) (*dburl.DB, error) {
	raw, err := e.databaseURL(f, cfg)
	if err != nil {
		return nil, err
	}
	db, err := e.dial(raw)
	if err != nil {
		return nil, err
	}
	if v, err := store.SchemaVersion(e.ctx, db.Backend().Store.DB()); err != nil || v == 0 {
		hint := e.schemaHint(db, what, err)
		db.Close()
		return nil, hint
	}
	return db, nil
}

// schemaHint explains a failed query: when the outbox tables are missing
// it says to run 'outbox migrate' instead of echoing the driver's error.
func (e *env) schemaHint(db *dburl.DB, what string, err error) error {
	if e.ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if v, verr := store.SchemaVersion(e.ctx, db.Backend().Store.DB()); verr != nil || v == 0 {
		return fmt.Errorf("%s: the outbox tables are not installed in this database; run 'outbox migrate' first", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}
