package outbox

import (
	"context"

	"github.com/txoutbox/outbox/internal/store"
)

// Driver connects the outbox to a database through one Go database
// driver; TTx is the transaction type Enqueue accepts. The driver packages
// provide them: outboxpgx (pgx v5: pgx.Tx) and outboxsql (database/sql:
// *sql.Tx, for PostgreSQL, MySQL/MariaDB and SQLite). Its methods are for
// this module only.
type Driver[TTx any] interface {
	// Backend is the driver's store and database extras.
	Backend() *store.Backend
	// TxQuerier runs statements in the caller's transaction.
	TxQuerier(tx TTx) store.Querier
	// InTx runs fn in a new transaction on the driver's pool, committing
	// when fn returns nil and rolling back otherwise.
	InTx(ctx context.Context, fn func(tx TTx) error) error
}
