package outbox

import (
	"context"
	"fmt"

	"github.com/txoutbox/outbox/internal/store"
)

// Migrate creates or upgrades the outbox tables (outbox_messages,
// outbox_inbox and the relays' bookkeeping) and returns the versions it
// applied; none when the schema is current. It is safe to run from several
// processes at once. The outbox never creates tables implicitly.
func Migrate[TTx any](ctx context.Context, driver Driver[TTx]) ([]int, error) {
	b := driver.Backend()
	s, err := b.Session(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: migrate: %w", err)
	}
	defer s.Close()
	done, err := store.Migrate(ctx, b.Store.Dialect(), s)
	if err != nil {
		return done, fmt.Errorf("outbox: migrate: %w", err)
	}
	return done, nil
}

// SchemaSQL returns the complete schema for dialect ("postgres", "mysql"
// or "sqlite") for users who apply migrations with their own tool.
func SchemaSQL(dialect string) (string, error) {
	d, err := store.ParseDialect(dialect)
	if err != nil {
		return "", fmt.Errorf("outbox: %w", err)
	}
	return store.SchemaSQL(d)
}
