package outboxpgx_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/drivertest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) driver.Driver[pgx.Tx] {
		return testdb.Empty(t, store.Postgres).PGX
	})
}

// TestConformanceBatched: the driver whose transaction values are batches
// (driver.Queuer) passes the same suite.
func TestConformanceBatched(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) driver.Driver[*pgx.Batch] {
		return testdb.Empty(t, store.Postgres).PGX.Batched()
	})
}
