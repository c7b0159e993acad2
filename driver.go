package outbox

import (
	"fmt"
	"reflect"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/internal/store"
)

// Driver connects the outbox to a database through one Go database
// driver; TTx is the transaction type Enqueue accepts. The driver packages
// provide them: outboxpgx (pgx v5: pgx.Tx) and outboxsql (database/sql:
// *sql.Tx, for PostgreSQL, MySQL/MariaDB and SQLite). Package driver
// documents the contract for anyone writing another.
type Driver[TTx any] = driver.Driver[TTx]

// backendOf builds what the engine runs on from d, refusing a nil driver
// (a nil interface, or a nil pointer in one) with an error that op names.
func backendOf[TTx any](op string, d Driver[TTx]) (*store.Backend, error) {
	if v := reflect.ValueOf(d); !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return nil, fmt.Errorf("outbox: %s: nil driver", op)
	}
	return store.NewBackend(d), nil
}
