// Package pg holds what both PostgreSQL drivers share: error translation
// by SQLSTATE and LISTEN/NOTIFY over a pgx connection.
package pg

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txoutbox/outbox/driver"
)

// Translate marks a PostgreSQL error by its SQLSTATE: 23505 as
// driver.ErrUniqueViolation, 40P01 and 40001 as driver.ErrDeadlock. Other
// errors come back unchanged.
func Translate(err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "23505":
		return driver.Mark(err, driver.ErrUniqueViolation)
	case "40P01", "40001":
		return driver.Mark(err, driver.ErrDeadlock)
	}
	return err
}

// NotifySQL signals listeners of the channel given as its one argument.
const NotifySQL = "SELECT pg_notify($1, '')"

// Listen listens on channel over conn and calls wake once listening (so
// messages committed before LISTEN took effect are read) and for every
// notification, until ctx is done or the connection fails.
func Listen(ctx context.Context, conn *pgx.Conn, channel string, wake func()) error {
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}
