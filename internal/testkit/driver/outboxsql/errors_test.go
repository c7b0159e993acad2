package outboxsql_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMySQLStatementTimeoutIsDeadlineExceeded: a statement MariaDB stops
// at its max_statement_time (error 1969) is reported as a timeout, as the
// caller's context would report it, with the server's error still there.
func TestMySQLStatementTimeoutIsDeadlineExceeded(t *testing.T) {
	db := testdb.Empty(t, store.MySQL)
	rows, err := db.Std.Executor().Query(context.Background(), "SET STATEMENT max_statement_time=0.05 FOR SELECT SLEEP(5)")
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	var me *mysql.MySQLError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &me) || me.Number != 1969 {
		t.Fatalf("got %v, want error 1969 marked context.DeadlineExceeded", err)
	}
}
