package adoptstore

import (
	"context"
	"strings"
	"time"
)

// The idle relay's wake-ups over an adopted table: the change probe, and
// on PostgreSQL the trigger `outbox adopt sql` prints (see package
// store's probe.go); the relays' registrations are the base store's.

// Probe returns a value that changes whenever the application added a row
// to the adopted table (its highest id, over the integer primary key the
// profile names).
func (a *Store) Probe(ctx context.Context) (int64, error) {
	return queryOne[int64](ctx, a.base.Pool(), "SELECT COALESCE(MAX("+a.ad.ident(a.p.ID)+"), 0) FROM "+a.table())
}

// RecordWake is the base store's: an adopted table's relays register
// there too.
func (a *Store) RecordWake(ctx context.Context, id, wake string) (bool, error) {
	return a.base.RecordWake(ctx, id, wake)
}

// WakeTrigger reports whether the adopted table has the trigger that
// notifies idle relays (`outbox adopt sql` prints it).
func (a *Store) WakeTrigger(ctx context.Context) (bool, error) {
	return a.base.WakeTriggerOn(ctx, a.p.Table)
}

// WantWake is the base store's.
func (a *Store) WantWake(ctx context.Context, id string, want bool) error {
	return a.base.WantWake(ctx, id, want)
}

// PruneWake is the base store's.
func (a *Store) PruneWake(ctx context.Context, age time.Duration) error {
	return a.base.PruneWake(ctx, age)
}

// WakeTriggerSQL is the DDL that gives an adopted table on PostgreSQL the
// trigger of outbox_messages: while a relay is idle, each INSERT
// statement wakes it (schema version 18 makes the function).
func WakeTriggerSQL(table string) string {
	return "CREATE TRIGGER " + quote(table+"_outbox_wake") + " AFTER INSERT ON " + quote(table) +
		" FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify_wake()"
}

// DatabaseFile is the base store's.
func (a *Store) DatabaseFile(ctx context.Context) (string, error) { return a.base.DatabaseFile(ctx) }

// FeedTable is the adopted table's name, without its schema.
func (a *Store) FeedTable() string {
	t := a.p.Table
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		t = t[i+1:]
	}
	return t
}
