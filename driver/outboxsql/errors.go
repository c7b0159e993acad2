package outboxsql

import (
	"context"
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/internal/pg"
)

// translator returns the error translation of dialect d.
func translator(d driver.Dialect) func(error) error {
	switch d {
	case driver.Postgres:
		return pg.Translate
	case driver.MySQL:
		return translateMySQL
	}
	return translateSQLite
}

// MySQL and MariaDB error numbers.
const (
	erDupEntry        = 1062
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
	// A statement stopped at its time limit: MariaDB's max_statement_time
	// (ER_STATEMENT_TIMEOUT), MySQL's MAX_EXECUTION_TIME (ER_QUERY_TIMEOUT).
	erStatementTimeout = 1969
	erQueryTimeout     = 3024
)

// translateMySQL marks go-sql-driver/mysql errors by number. A statement
// the server stopped at its time limit is marked context.DeadlineExceeded:
// it is the timeout the caller's context would have reported a moment
// later (the outbox sets such limits on its own statements to match their
// contexts' deadlines).
func translateMySQL(err error) error {
	var me *mysql.MySQLError
	if err == nil || !errors.As(err, &me) {
		return err
	}
	switch me.Number {
	case erDupEntry:
		return driver.Mark(err, driver.ErrUniqueViolation)
	case erLockDeadlock, erLockWaitTimeout:
		return driver.Mark(err, driver.ErrDeadlock)
	case erStatementTimeout, erQueryTimeout:
		return driver.Mark(err, context.DeadlineExceeded)
	}
	return err
}

// SQLite extended result codes.
const (
	sqliteBusySnapshot         = 517  // SQLITE_BUSY_SNAPSHOT
	sqliteConstraintPrimaryKey = 1555 // SQLITE_CONSTRAINT_PRIMARYKEY
	sqliteConstraintUnique     = 2067 // SQLITE_CONSTRAINT_UNIQUE
)

// sqliteError is what modernc.org/sqlite's *Error offers: its extended
// result code. Matching the method keeps SQLite out of binaries that do not
// use it.
type sqliteError interface{ Code() int }

// translateSQLite marks SQLite errors by extended result code.
func translateSQLite(err error) error {
	var se sqliteError
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch se.Code() {
	case sqliteConstraintUnique, sqliteConstraintPrimaryKey:
		return driver.Mark(err, driver.ErrUniqueViolation)
	case sqliteBusySnapshot:
		return driver.Mark(err, driver.ErrDeadlock)
	}
	return err
}
