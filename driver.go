package outbox

import (
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/internal/store"
)

// Driver connects the outbox to a database through one Go database
// driver; TTx is the transaction type Enqueue accepts. The driver packages
// provide them: outboxpgx (pgx v5: pgx.Tx) and outboxsql (database/sql:
// *sql.Tx, for PostgreSQL, MySQL/MariaDB and SQLite). Package driver
// documents the contract for anyone writing another.
type Driver[TTx any] = driver.Driver[TTx]

// backendOf builds what the engine runs on from d.
func backendOf[TTx any](d Driver[TTx]) *store.Backend { return store.NewBackend(d) }
