package store

import (
	"context"
	"fmt"
)

// MigrateBackend applies the migrations of the layout o chooses that b's
// database lacks (MigrateWith, over a session of its own), then enables
// the snapshot read when snapshot is set (Store.EnableSnapshotRead), and
// returns the versions it applied.
func MigrateBackend(ctx context.Context, b *Backend, o MigrateOptions, snapshot bool) ([]int, error) {
	s, err := b.Session(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	done, err := MigrateWith(ctx, b.Store.Dialect(), s, o)
	if err != nil {
		return done, err
	}
	if snapshot {
		if err := b.Store.EnableSnapshotRead(ctx); err != nil {
			return done, err
		}
	}
	return done, nil
}

// LayoutSQL is the complete schema of the dialect named dialect in the
// layout o chooses (SchemaSQLWith), followed by the step that enables
// the snapshot read when snapshot is set (SnapshotSQL; PostgreSQL, on a
// table not partitioned).
func LayoutSQL(dialect string, o MigrateOptions, snapshot bool) (string, error) {
	d, err := ParseDialect(dialect)
	if err != nil {
		return "", err
	}
	s, err := SchemaSQLWith(d, o)
	if err != nil {
		return "", err
	}
	if snapshot {
		if d != Postgres || o.Partitioned {
			return "", fmt.Errorf("%w, on a table not partitioned", ErrSnapshotDialect)
		}
		snap, err := SnapshotSQL()
		if err != nil {
			return "", err
		}
		s += "\n" + snap
	}
	return s, nil
}
