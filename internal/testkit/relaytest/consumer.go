package relaytest

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// Effects creates the table "effects (message_id)" in db and returns an
// inbox over it, for consumer tests that count effects: apply one with
// InsertEffect inside the inbox's transaction.
func Effects(t testing.TB, db *testdb.DB, consumer string) *inbox.Inbox[pgx.Tx] {
	t.Helper()
	db.Exec(t, `CREATE TABLE effects (message_id text NOT NULL)`)
	ib, err := inbox.New(db.PGX, &inbox.Config{Consumer: consumer})
	if err != nil {
		t.Fatal(err)
	}
	return ib
}

// InsertEffect records m's effect in the effects table through tx.
func InsertEffect(ctx context.Context, tx pgx.Tx, m *inbox.Message) error {
	_, err := tx.Exec(ctx, `INSERT INTO effects (message_id) VALUES ($1)`, m.ID)
	return err
}

// Twice publishes every batch two times, as a redelivery would.
type Twice struct{ outbox.Publisher }

// Publish sends batch, and when every message was confirmed, sends it again.
func (p Twice) Publish(ctx context.Context, batch []*outbox.Envelope) []error {
	if errs := p.Publisher.Publish(ctx, batch); errors.Join(errs...) != nil {
		return errs
	}
	return p.Publisher.Publish(ctx, batch)
}
