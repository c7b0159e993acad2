package store

import (
	"context"
	"time"
)

// gaugeStatements samples the relay's gauges in one round trip, per
// dialect. Each part reads an index built for it, so the cost follows the
// number of pending and dead rows, never the sent ones:
//   - pending count: the pending-rows index (partial on PostgreSQL and
//     SQLite, (status, id) on MySQL);
//   - dead count: the status/topic index (partial, status <> 'sent', on
//     PostgreSQL);
//   - oldest pending: the lowest pending id through the pending-rows index,
//     then that row's created_at against the database clock;
//   - the database clock itself, for the relay's latency figures.
var gaugeStatements = map[Dialect]string{
	Postgres: `SELECT
  (SELECT count(*) FROM outbox_messages WHERE status = 'pending'),
  (SELECT count(*) FROM outbox_messages WHERE status = 'dead'),
  (SELECT extract(epoch from now() - created_at)::float8 FROM outbox_messages WHERE status = 'pending' ORDER BY id LIMIT 1),
  extract(epoch from now())::float8`,
	MySQL: `SELECT
  (SELECT count(*) FROM outbox_messages FORCE INDEX (outbox_messages_pending_idx) WHERE status = 'pending'),
  (SELECT count(*) FROM outbox_messages FORCE INDEX (outbox_messages_status_topic_idx) WHERE status = 'dead'),
  (SELECT TIMESTAMPDIFF(MICROSECOND, created_at, NOW(6)) / 1000000.0 FROM outbox_messages FORCE INDEX (outbox_messages_pending_idx)
     WHERE status = 'pending' ORDER BY id LIMIT 1),
  UNIX_TIMESTAMP(NOW(6))`,
	SQLite: `SELECT
  (SELECT count(*) FROM outbox_messages INDEXED BY outbox_messages_pending_idx WHERE status = 'pending'),
  (SELECT count(*) FROM outbox_messages INDEXED BY outbox_messages_status_topic_idx WHERE status = 'dead'),
  (SELECT (julianday('now') - julianday(created_at)) * 86400.0 FROM outbox_messages INDEXED BY outbox_messages_pending_idx
     WHERE status = 'pending' ORDER BY id LIMIT 1),
  ((julianday('now') - 2440587.5) * 86400.0)`,
}

// GaugeSample is what the relay's periodic sample of the table found.
type GaugeSample struct {
	// Pending and Dead count rows in those statuses.
	Pending, Dead int64
	// OldestPendingAge is the age of the pending row with the lowest id
	// (0 when there is none), by the database clock.
	OldestPendingAge time.Duration
	// Now is the database clock when it was taken.
	Now time.Time
}

// Gauges samples pending and dead counts, the oldest pending message's
// age and the database clock with one cheap statement (no sent row is
// read).
func (st *Store) Gauges(ctx context.Context) (GaugeSample, error) {
	var g GaugeSample
	rows, err := st.db.Query(ctx, gaugeStatements[st.d])
	if err != nil {
		return g, err
	}
	defer rows.Close()
	if rows.Next() {
		var pending, dead int64
		var age *float64
		var now float64
		if err := rows.Scan(&pending, &dead, &age, &now); err != nil {
			return g, err
		}
		g.Pending, g.Dead, g.Now = pending, dead, fromEpoch(now)
		if age != nil {
			g.OldestPendingAge = time.Duration(max(*age, 0) * float64(time.Second))
		}
	}
	return g, rows.Err()
}
