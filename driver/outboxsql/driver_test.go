package outboxsql_test

import (
	"database/sql"
	"testing"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/drivertest"
	"github.com/txoutbox/outbox/internal/testdb"
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
