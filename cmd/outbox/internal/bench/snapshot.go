package bench

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

// The snapshot read (docs/snapshot-read.md) for `drain` and `steady
// --read-path snapshot`: the relays read what committed between two
// transaction snapshots and write nothing for a message they delivered.
// The run takes a database of its own on --db's server, enables the
// snapshot read there (never on the database --db names) and drops it
// after.
const (
	readPathTable    = "table"
	readPathSnapshot = "snapshot"
)

// snapshotRun runs drain or steady --read-path snapshot in a fresh
// database.
func snapshotRun(ctx context.Context, o *options, dest *destination, stderr io.Writer) (res *result, runErr, cleanErr error) {
	d, _, err := dburl.Parse(o.dbURL)
	if err != nil {
		return nil, err, nil
	}
	url, drop, err := freshDatabase(ctx, o.dbURL, d, "bench_snapshot_"+newRunID())
	if err != nil {
		return nil, err, nil
	}
	to := *o
	to.dbURL = url
	res, runErr, closeErr := inScratch(ctx, &to, dest, stderr, (*bench).run)
	return res, runErr, errors.Join(closeErr, drop())
}

// enableSnapshotRead enables the snapshot read in the run's own database.
func (b *bench) enableSnapshotRead(ctx context.Context) error {
	src, err := store.SnapshotSQL()
	if err != nil {
		return err
	}
	for _, q := range store.SplitStatements(src) {
		if _, err := b.db.Pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("snapshot read: %w", err)
		}
	}
	return nil
}

// statusColumn is the status as the relays see it: a message the
// snapshot read delivered is sent once its partition's cursor, recorded
// when the relays stop, has passed it.
func (b *bench) statusColumn() string {
	if b.o.readPath == readPathSnapshot {
		return store.SnapshotStatus
	}
	return "status"
}
