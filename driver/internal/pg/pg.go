// Package pg holds what both PostgreSQL drivers share: error translation
// by SQLSTATE and LISTEN/NOTIFY over a pgx connection.
package pg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

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

// tableSchema is the schema of the outbox_messages the connection's
// search_path finds (empty when none): the schemas of one database share its
// NOTIFY channels, so a signal names the schema it is about.
const tableSchema = "coalesce((SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = to_regclass('outbox_messages')), '')"

// NotifySQL signals listeners of the channel given as its one argument,
// with the producer's outbox schema as the payload.
const NotifySQL = "SELECT pg_notify($1, " + tableSchema + ")"

// probeTimeout is how long Listen waits for its own check signal. A
// server delivers it as soon as the notifying statement commits.
const probeTimeout = 5 * time.Second

// Listen listens on channel over conn and calls wake once listening (so
// messages committed before LISTEN took effect are read) and for every
// notification, until ctx is done or the connection fails.
//
// Before that it checks that notifications reach conn at all: notify
// sends a NOTIFY with a payload of its own on channel from another
// connection. Through a pooler in transaction mode the LISTEN stays on
// whichever server connection ran it, which then serves other clients,
// so the payload never comes back: Listen returns driver.ErrNoSignals.
//
// A notification whose payload names another schema's outbox (a producer
// in another schema of the same database) is not a wake-up; one with an
// empty payload (plain SQL's pg_notify of the channel alone) always is.
func Listen(ctx context.Context, conn *pgx.Conn, channel string, wake func(), notify func(ctx context.Context, payload string) error) error {
	var schema string
	if err := conn.QueryRow(ctx, "SELECT "+tableSchema).Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	wake()
	if err := probe(ctx, conn, func(string) { wake() }, notify); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == "" || n.Payload == schema {
			wake()
		}
	}
}

// probe notifies channel with a random payload through notify and waits
// up to probeTimeout for it on conn, handing every notification to got
// meanwhile.
func probe(ctx context.Context, conn *pgx.Conn, got func(payload string), notify func(ctx context.Context, payload string) error) error {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := "probe-" + hex.EncodeToString(b)
	wctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := notify(wctx, token); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return driver.ErrNoSignals
			}
			return err
		}
		got(n.Payload)
		if n.Payload == token {
			return nil
		}
	}
}

// ProbeSQL sends the check signal: channel and payload are its arguments.
const ProbeSQL = "SELECT pg_notify($1, $2)"
