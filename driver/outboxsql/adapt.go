package outboxsql

import (
	"context"
	"database/sql"

	"github.com/txoutbox/outbox/driver"
)

// Conn runs statements. *sql.DB, *sql.Conn and *sql.Tx are Conns, and so
// are the transactions of the ORMs built on database/sql: GORM's
// tx.Statement.ConnPool (a *sql.Tx, or GORM's prepared-statement
// transaction with PrepareStmt: true), bun.Tx, sqlx.Tx, and ent's Tx
// generated with the sql/execquery feature.
type Conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Adapter is a Driver for the transaction type TTx of an ORM over the
// Driver's *sql.DB, so that Producer.Enqueue takes the ORM's own
// transaction (a *gorm.DB, an *ent.Tx, …). It implements
// driver.Driver[TTx] and driver.Listener.
type Adapter[TTx any] struct {
	*Driver
	conn  func(TTx) Conn
	begin func(ctx context.Context, fn func(TTx) error) error
}

var _ driver.Driver[*sql.Tx] = (*Adapter[*sql.Tx])(nil)

// Adapt returns a driver whose transactions are the ORM's: conn returns
// what runs statements inside one of them, and begin runs fn in a new one,
// committing when fn returns nil and rolling back otherwise. Statements
// outside a transaction, sessions and wake-ups go through d, which must be
// over the same *sql.DB as the ORM. For GORM:
//
//	sqlDB, err := gormDB.DB()
//	base, err := outboxsql.New(sqlDB, nil)
//	drv := outboxsql.Adapt(base,
//		func(tx *gorm.DB) outboxsql.Conn { return tx.Statement.ConnPool },
//		func(ctx context.Context, fn func(*gorm.DB) error) error {
//			return gormDB.WithContext(ctx).Transaction(fn)
//		})
func Adapt[TTx any](d *Driver, conn func(TTx) Conn, begin func(ctx context.Context, fn func(TTx) error) error) *Adapter[TTx] {
	return &Adapter[TTx]{Driver: d, conn: conn, begin: begin}
}

// UnwrapExecutor runs statements in the ORM's transaction tx.
func (a *Adapter[TTx]) UnwrapExecutor(tx TTx) driver.Executor {
	return executor{a.conn(tx), a.translate}
}

// InTx runs fn in a new transaction of the ORM.
func (a *Adapter[TTx]) InTx(ctx context.Context, fn func(tx TTx) error) error {
	return a.translate(a.begin(ctx, fn))
}
