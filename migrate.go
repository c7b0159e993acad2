package outbox

import (
	"context"
	"fmt"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/internal/store"
)

// MigrateOpts chooses the schema layout Migrate creates and SchemaSQL
// prints. A nil *MigrateOpts is the default layout.
type MigrateOpts struct {
	// Partitioned creates outbox_messages as a table partitioned by day
	// (PostgreSQL only), so that retention drops whole days instead of
	// deleting rows: same columns and meanings, message ids are version 7
	// UUIDs (the default) by which rows fall into days. It applies when
	// the table is created; on an existing unpartitioned table Migrate
	// refuses it (converting is a copy, see docs/retention.md). Defaults
	// to false.
	Partitioned bool
	// SnapshotRead also enables the snapshot read (PostgreSQL, not with
	// Partitioned; see RelayConfig.SnapshotRead): a column and an index
	// on outbox_messages, the read cursors on outbox_leases, and their
	// functions. Running it again changes nothing. Defaults to false.
	SnapshotRead bool
}

func (o *MigrateOpts) store() store.MigrateOptions {
	if o == nil {
		return store.MigrateOptions{}
	}
	return store.MigrateOptions{Partitioned: o.Partitioned}
}

// Migrate creates or upgrades the outbox tables (outbox_messages,
// outbox_inbox and the relays' bookkeeping) in the layout opts chooses
// (nil: the default) and returns the versions it applied; none when the
// schema is current. It is safe to run from several processes at once.
// The outbox never creates tables implicitly.
func Migrate[TTx any](ctx context.Context, driver Driver[TTx], opts *MigrateOpts) ([]int, error) {
	b, err := backendOf("Migrate", driver)
	if err != nil {
		return nil, err
	}
	done, err := store.MigrateBackend(ctx, b, opts.store(), opts != nil && opts.SnapshotRead)
	if err != nil {
		return done, fmt.Errorf("outbox: migrate: %w", err)
	}
	return done, nil
}

// SchemaSQL returns the complete schema of dialect, in the layout opts
// chooses (nil: the default), for users who apply migrations with their
// own tool.
func SchemaSQL(dialect driver.Dialect, opts *MigrateOpts) (string, error) {
	s, err := store.LayoutSQL(string(dialect), opts.store(), opts != nil && opts.SnapshotRead)
	if err != nil {
		return "", fmt.Errorf("outbox: %w", err)
	}
	return s, nil
}
