package store

import (
	"context"
	"time"
)

// Change probes.
//
// A relay that is idle learns of new rows by probing the table's highest
// id every few milliseconds and reading only when it changed: the
// primary key's last entry, one index lookup, where a full read runs the
// ready-rows query over every partition. Every producer moves it, whatever
// it writes with (plain SQL, another language, an application whose table
// the relay adopted), and no trigger or schema change is needed. A row
// committed out of id order (a transaction that took its id before
// another's and committed after it) does not move the highest id; the
// reads that follow any round that found rows, MinPollInterval apart and
// doubling, find it.

const (
	probeSQL = "SELECT COALESCE(MAX(id), 0) FROM outbox_messages"
	// wakeVersion is the migration that adds outbox_relays.wake.
	wakeVersion = 18
)

// Probe returns a value that changes whenever a row was added to the
// table (its highest id).
func (st *Store) Probe(ctx context.Context) (int64, error) {
	return QueryInt64(ctx, st.db, probeSQL)
}

// RecordWake records how relay id learns of new messages between its
// polls (e.g. "notify + probe 10ms", "poll") beside its heartbeat, for
// `outbox status`. It reports whether the relay's row was there to hold
// it (its first heartbeat makes it). A schema from before version 18 has
// no place for it: nothing is recorded, and it reports true.
func (st *Store) RecordWake(ctx context.Context, id, wake string) (bool, error) {
	n, err := st.db.Exec(ctx, "UPDATE outbox_relays SET wake = "+st.dl.ph(1)+" WHERE relay_id = "+st.dl.ph(2), wake, id)
	if err != nil {
		if v, verr := SchemaVersion(ctx, st.db); verr == nil && v < wakeVersion {
			return true, nil
		}
		return false, err
	}
	return n > 0, nil
}

// relayWakes returns the wake-up each registered relay recorded, by id.
func (st *Store) relayWakes(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	_, err := AppendRows(ctx, st.db, nil, func(scan func(...any) error) (struct{}, error) {
		var id, wake string
		err := scan(&id, &wake)
		out[id] = wake
		return struct{}{}, err
	}, "SELECT relay_id, wake FROM outbox_relays WHERE wake IS NOT NULL")
	if err != nil {
		if v, verr := SchemaVersion(ctx, st.db); verr == nil && v < wakeVersion {
			return nil, nil
		}
		return nil, err
	}
	return out, nil
}

// QueryInt64 runs a query that returns one integer (0 when it returns no
// row).
func QueryInt64(ctx context.Context, q Querier, sql string, args ...any) (int64, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, err
		}
	}
	return n, rows.Err()
}

// Wake-ups by trigger (PostgreSQL).
//
// Schema version 18 puts a statement-level trigger on outbox_messages
// that notifies the relays' LISTEN channel while outbox_wake_wanted holds
// a row: a relay adds its row when it is idle and removes it when it is
// busy, so that under load no producer's commit notifies (a NOTIFY
// serializes the commits of every notifying transaction).

const wakeTriggerSQL = `SELECT EXISTS (SELECT 1 FROM pg_trigger AS t JOIN pg_proc AS p ON p.oid = t.tgfoid
WHERE t.tgrelid = to_regclass($1) AND p.proname = 'outbox_notify_wake' AND t.tgenabled <> 'D')`

// WakeTrigger reports whether outbox_messages has the trigger that
// notifies idle relays (PostgreSQL, schema version 18 and later).
func (st *Store) WakeTrigger(ctx context.Context) (bool, error) {
	return st.WakeTriggerOn(ctx, "outbox_messages")
}

// WakeTriggerOn reports whether table has the trigger that notifies idle
// relays (PostgreSQL, schema version 18 and later; false elsewhere).
func (st *Store) WakeTriggerOn(ctx context.Context, table string) (bool, error) {
	if st.d != Postgres {
		return false, nil
	}
	n, err := queryInt(ctx, st.db, "SELECT CASE WHEN ("+wakeTriggerSQL+") THEN 1 ELSE 0 END", table)
	return n == 1, err
}

// WantWake adds or refreshes (want) or removes relay id's row of
// outbox_wake_wanted: while any row is there, the trigger notifies at
// each insert.
func (st *Store) WantWake(ctx context.Context, id string, want bool) error {
	if st.d != Postgres {
		return nil
	}
	q := "DELETE FROM outbox_wake_wanted WHERE relay_id = $1"
	if want {
		q = "INSERT INTO outbox_wake_wanted (relay_id) VALUES ($1) ON CONFLICT (relay_id) DO UPDATE SET since = now()"
	}
	_, err := st.db.Exec(ctx, q, id)
	return err
}

// PruneWake removes the rows of relays that died without removing
// theirs: rows not refreshed for age whose relay has not renewed its
// registration for age either (an adopted table's relay registers
// nothing and refreshes its row instead).
func (st *Store) PruneWake(ctx context.Context, age time.Duration) error {
	if st.d != Postgres {
		return nil
	}
	_, err := st.db.Exec(ctx, `DELETE FROM outbox_wake_wanted AS w
WHERE w.since < now() - ($1)::bigint * interval '1 microsecond'
  AND NOT EXISTS (SELECT 1 FROM outbox_relays AS r
    WHERE r.relay_id = w.relay_id AND r.seen_at > now() - ($1)::bigint * interval '1 microsecond')`, age.Microseconds())
	return err
}

// DatabaseFile is the file of a SQLite database ("" elsewhere, and for an
// in-memory database): the relay watches it for other processes' commits.
func (st *Store) DatabaseFile(ctx context.Context) (string, error) {
	if st.d != SQLite {
		return "", nil
	}
	rows, err := st.db.Query(ctx, "SELECT file FROM pragma_database_list WHERE name = 'main'")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var f string
	if rows.Next() {
		if err := rows.Scan(&f); err != nil {
			return "", err
		}
	}
	return f, rows.Err()
}

// FeedTable is the table a change feed (driver.ChangeFeed) follows for
// the relay: outbox_messages.
func (st *Store) FeedTable() string { return "outbox_messages" }
