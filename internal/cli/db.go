package cli

import (
	"errors"
	"flag"
	"fmt"
	"net/url"

	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

// dbFlags are the flags of every command that reads the database.
type dbFlags struct {
	db     string
	config string
}

func (f *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.db, "db", "", "database `URL` (default $OUTBOX_DATABASE_URL, then the config file's database)")
	fs.StringVar(&f.config, "config", "", "YAML config `FILE` (default $OUTBOX_CONFIG)")
}

// passwordOf returns the password in a URL, "" when none.
func passwordOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}

// databaseURL resolves the database URL: --db, then OUTBOX_DATABASE_URL,
// then the config file.
func (e *env) databaseURL(f dbFlags, cfg *fileConfig) (string, error) {
	raw := f.db
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
