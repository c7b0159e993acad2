package outboxsql_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/drivertest"
	"github.com/txoutbox/outbox/driver/outboxsql"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestConformance(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			drivertest.Run(t, func(t *testing.T) driver.Driver[*sql.Tx] {
				return testdb.Empty(t, d).Std
			})
		})
	}
}

// ormTx stands for an ORM's own transaction type that wraps a *sql.Tx.
type ormTx struct{ tx *sql.Tx }

// TestAdapterConformance runs the conformance suite through Adapt, with a
// transaction type of the caller's own.
func TestAdapterConformance(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			drivertest.Run(t, func(t *testing.T) driver.Driver[*ormTx] {
				db := testdb.Empty(t, d)
				base, err := outboxsql.New(db.SQL, nil)
				if err != nil {
					t.Fatal(err)
				}
				return outboxsql.Adapt(base,
					func(tx *ormTx) outboxsql.Conn { return tx.tx },
					func(ctx context.Context, fn func(*ormTx) error) error {
						tx, err := db.SQL.BeginTx(ctx, nil)
						if err != nil {
							return err
						}
						if err := fn(&ormTx{tx}); err != nil {
							_ = tx.Rollback()
							return err
						}
						return tx.Commit()
					})
			})
		})
	}
}
