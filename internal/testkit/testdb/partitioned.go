package testdb

import (
	"context"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
)

// NewPartitioned opens a fresh PostgreSQL schema migrated with the
// time-partitioned outbox_messages (`outbox migrate --partitioned`).
func NewPartitioned(t testing.TB) *DB {
	t.Helper()
	db := Empty(t, store.Postgres)
	s, err := db.Backend().Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := store.MigrateWith(context.Background(), store.Postgres, s, store.MigrateOptions{Partitioned: true}); err != nil {
		t.Fatalf("migrate --partitioned: %v", err)
	}
	return db
}

// Attached is the set of partitions attached to outbox_messages.
func (d *DB) Attached(t testing.TB) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, name := range d.Strings(t, "SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid WHERE i.inhparent = 'outbox_messages'::regclass") {
		out[name] = true
	}
	return out
}
