package outboxnats_test

import (
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// newPostgres is a per-test PostgreSQL database with the outbox schema.
func newPostgres(t *testing.T) *testdb.DB {
	t.Helper()
	return testdb.New(t, store.Postgres)
}
