// Package outboxsql is the outbox driver for database/sql: PostgreSQL
// (through pgx's stdlib driver), MySQL/MariaDB (go-sql-driver/mysql) and
// SQLite (modernc.org/sqlite). Enqueue takes a *sql.Tx: sqlx and bun users
// pass the one inside their transaction; Adapt makes a driver whose
// Enqueue takes an ORM's own transaction type, such as GORM's *gorm.DB.
//
//	db, err := sql.Open("mysql", "user:pass@tcp(host:3306)/app?parseTime=true")
//	drv, err := outboxsql.New(db, nil) // the dialect follows db's driver
//
// On PostgreSQL with the pgx stdlib driver, relays wake on LISTEN/NOTIFY;
// elsewhere they poll adaptively. Producers and relays over the same
// *sql.DB wake each other in process, whether they share one Driver or
// each built their own.
package outboxsql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/internal/pg"
)

// Config tunes a Driver.
type Config struct {
	// Dialect is the database behind the *sql.DB. Defaults to the one its
	// Go driver speaks when that is pgx's stdlib (driver.Postgres),
	// go-sql-driver/mysql (driver.MySQL) or modernc.org/sqlite
	// (driver.SQLite); it must be set for any other Go driver.
	Dialect driver.Dialect
}

// Driver runs the outbox over a *sql.DB; Enqueue takes a *sql.Tx. It
// implements driver.Driver[*sql.Tx] and driver.Listener (supported on
// PostgreSQL through pgx's stdlib driver).
type Driver struct {
	db        *sql.DB
	dialect   driver.Dialect
	translate func(error) error
	listen    bool
	// stmts are the pool executor's prepared statements, on SQLite only
	// (elsewhere preparing costs a round trip and the server caches
	// plans, or pgx prepares by itself).
	stmts *stmtCache
}

var (
	_ driver.Driver[*sql.Tx] = (*Driver)(nil)
	_ driver.Listener        = (*Driver)(nil)
)

// New returns a driver over db; cfg may be nil. The *sql.DB is the
// caller's; the driver never closes it. For SQLite, open the database with
// a busy timeout (e.g. "file:app.db?_pragma=busy_timeout(5000)") so the
// relay and producers wait for each other's write locks instead of failing.
func New(db *sql.DB, cfg *Config) (*Driver, error) {
	if db == nil {
		return nil, errors.New("outboxsql: nil *sql.DB")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Dialect == "" {
		c.Dialect = detect(db.Driver())
		if c.Dialect == "" {
			return nil, fmt.Errorf("outboxsql: Config.Dialect is required for Go driver %T", db.Driver())
		}
	}
	d, err := driver.ParseDialect(string(c.Dialect))
	if err != nil {
		return nil, fmt.Errorf("outboxsql: Config.Dialect: %w", err)
	}
	drv := &Driver{db: db, dialect: d, translate: translator(d)}
	_, isPGX := db.Driver().(*stdlib.Driver)
	drv.listen = isPGX && d == driver.Postgres
	if d == driver.SQLite {
		drv.stmts = newStmtCache(db)
	}
	return drv, nil
}

// detect names the dialect of the Go drivers the outbox knows, by their
// package, so that none of them is linked only for this.
func detect(d sqldriver.Driver) driver.Dialect {
	t := reflect.TypeOf(d)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.PkgPath() {
	case "github.com/jackc/pgx/v5/stdlib":
		return driver.Postgres
	case "github.com/go-sql-driver/mysql":
		return driver.MySQL
	case "modernc.org/sqlite":
		return driver.SQLite
	}
	return ""
}

// Dialect is the dialect New was given or detected.
func (d *Driver) Dialect() driver.Dialect { return d.dialect }

// Executor runs statements on the *sql.DB. On SQLite it prepares each
// statement text once (up to 64 of them, the least recently used closed
// first) and runs it prepared afterwards, each run in its own implicit
// transaction as before; statements in transactions and sessions are
// never prepared.
func (d *Driver) Executor() driver.Executor {
	if d.stmts != nil {
		return poolExecutor{executor{d.db, d.translate}, d.stmts}
	}
	return executor{d.db, d.translate}
}

// Close closes the statements the driver prepared on the *sql.DB; the
// executors keep working, unprepared. It does not close the *sql.DB,
// and closing the *sql.DB frees them too, so calling Close is needed
// only to keep a *sql.DB open after its Driver is dropped.
func (d *Driver) Close() error {
	if d.stmts == nil {
		return nil
	}
	return d.stmts.close()
}

// UnwrapExecutor runs statements in the caller's transaction tx.
func (d *Driver) UnwrapExecutor(tx *sql.Tx) driver.Executor { return executor{tx, d.translate} }

// InTx runs fn in a new transaction, committing when it returns nil.
func (d *Driver) InTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return d.translate(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return d.translate(err)
	}
	return d.translate(tx.Commit())
}

// Session takes a connection of the *sql.DB.
func (d *Driver) Session(ctx context.Context) (driver.Session, error) {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &session{executor{c, d.translate}, c}, nil
}

// Identity is the *sql.DB.
func (d *Driver) Identity() any { return d.db }

// SupportsListen is true on PostgreSQL through pgx's stdlib driver.
func (d *Driver) SupportsListen() bool { return d.listen }

// Listen takes a connection of the *sql.DB for good (it carries the
// LISTEN, so it is discarded rather than reused) and waits on it. It
// returns driver.ErrNoSignals when a check signal sent from another
// connection does not arrive within seconds (a pooler in transaction
// mode).
func (d *Driver) Listen(ctx context.Context, channel string, wake func()) error {
	if !d.listen {
		return errors.New("outboxsql: LISTEN needs PostgreSQL through pgx's stdlib driver")
	}
	c, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		_ = c.Raw(func(any) error { return sqldriver.ErrBadConn })
		_ = c.Close()
	}()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errors.New("outboxsql: not a pgx stdlib connection")
		}
		return pg.Listen(ctx, sc.Conn(), channel, wake, func(ctx context.Context, payload string) error {
			_, err := d.db.ExecContext(ctx, pg.ProbeSQL, channel, payload)
			return err
		})
	})
}

// Notify runs pg_notify on a connection of the *sql.DB.
func (d *Driver) Notify(ctx context.Context, channel string) error {
	if !d.listen {
		return errors.New("outboxsql: NOTIFY needs PostgreSQL through pgx's stdlib driver")
	}
	_, err := d.db.ExecContext(ctx, pg.NotifySQL, channel)
	return err
}
