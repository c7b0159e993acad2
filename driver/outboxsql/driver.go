// Package outboxsql is the outbox driver for database/sql: PostgreSQL
// (through pgx's stdlib driver), MySQL/MariaDB (go-sql-driver/mysql) and
// SQLite (modernc.org/sqlite). Enqueue takes a *sql.Tx, so GORM, sqlx and
// ent users pass the transaction they already have.
//
//	db, _ := sql.Open("mysql", "user:pass@tcp(host:3306)/app?parseTime=true")
//	drv, _ := outboxsql.New(db, outboxsql.MySQL)
//
// On PostgreSQL with the pgx stdlib driver, relays wake on LISTEN/NOTIFY;
// elsewhere they poll adaptively.
package outboxsql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/txoutbox/outbox/internal/store"
)

// Dialect names the database behind a *sql.DB.
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql" // also MariaDB
	SQLite   Dialect = "sqlite"
)

// Driver runs the outbox over a *sql.DB; Enqueue takes a *sql.Tx.
type Driver struct {
	db      *sql.DB
	backend *store.Backend
}

// New returns a driver over db speaking dialect. The *sql.DB is the
// caller's; the driver never closes it. For SQLite, open the database with
// a busy timeout (e.g. "file:app.db?_pragma=busy_timeout(5000)") so the
// relay and producers wait for each other's write locks instead of failing.
func New(db *sql.DB, dialect Dialect) (*Driver, error) {
	if db == nil {
		return nil, errors.New("outboxsql: nil *sql.DB")
	}
	d, err := store.ParseDialect(string(dialect))
	if err != nil {
		return nil, fmt.Errorf("outboxsql: %w", err)
	}
	drv := &Driver{db: db}
	drv.backend = &store.Backend{
		Store:   store.New(d, store.SQL(db)),
		Session: func(ctx context.Context) (store.Session, error) { return store.SQLSession(ctx, db) },
	}
	if _, ok := db.Driver().(*stdlib.Driver); ok && d == store.Postgres {
		drv.backend.Listen = drv.listen
		drv.backend.Notify = func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "SELECT pg_notify($1, '')", store.NotifyChannel)
			return err
		}
	}
	return drv, nil
}

// Backend is for the outbox package.
func (d *Driver) Backend() *store.Backend { return d.backend }

// TxQuerier is for the outbox package.
func (d *Driver) TxQuerier(tx *sql.Tx) store.Querier { return store.SQL(tx) }

// InTx runs fn in a new transaction, committing when it returns nil.
func (d *Driver) InTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (d *Driver) listen(ctx context.Context, wake func()) error {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// The connection carries a LISTEN: close it rather than reuse it.
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.Close()
	}()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errors.New("not a pgx stdlib connection")
		}
		return store.ListenPGX(ctx, sc.Conn(), wake)
	})
}
