package store

import (
	"context"
	"fmt"
)

// ServerAdvice lists database settings that hurt the relay, as one-line
// explanations; empty when there is nothing to say or the database has no
// such settings (only PostgreSQL is checked).
//
//   - autovacuum off, for the server or for outbox_messages: every settle
//     leaves a dead row version and dead entries in the pending-rows index,
//     so reads grow slower with every message delivered (on this project's
//     test machine, p50 latency at 1,000 msg/s went from 2 ms to 25 ms
//     over a few million deliveries);
//   - jit on: the relay's read is estimated expensive whenever the
//     statistics last saw a backlog, and compiling it then takes longer
//     (7–9 ms) than running it.
func (st *Store) ServerAdvice(ctx context.Context) ([]string, error) {
	if st.d != Postgres {
		return nil, nil
	}
	rows, err := st.db.Query(ctx, `SELECT
  current_setting('autovacuum') = 'off'
    OR coalesce((SELECT option_value FROM pg_options_to_table(
         (SELECT reloptions FROM pg_class WHERE oid = to_regclass('outbox_messages')))
       WHERE option_name = 'autovacuum_enabled'), 'true') IN ('false', 'off', '0', 'no'),
  current_setting('jit') = 'on'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var vacuumOff, jitOn bool
	if rows.Next() {
		if err := rows.Scan(&vacuumOff, &jitOn); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read server settings: %w", err)
	}
	var out []string
	if vacuumOff {
		out = append(out, "autovacuum is off for outbox_messages: delivered rows leave dead versions that slow every read; turn it on or VACUUM outbox_messages every few minutes")
	}
	if jitOn {
		out = append(out, "jit is on for the relay's connections: it compiles the relay's read for longer than the read takes; connect with jit=off (e.g. ?jit=off in a pgx URL) or, through PgBouncer, which refuses that parameter, set it for the relay's role (ALTER ROLE … SET jit = off)")
	}
	return out, nil
}

// CheckSchema reports an error naming the versions when the database's
// schema is older than the migrations this build carries: the relay's
// statements need all of them (on PostgreSQL, the read function of migration 5).
func (st *Store) CheckSchema(ctx context.Context) error {
	ms, err := Migrations(st.d)
	if err != nil || len(ms) == 0 {
		return err
	}
	want := ms[len(ms)-1].Version
	have, err := SchemaVersion(ctx, st.db)
	if err != nil {
		return err
	}
	if have < want {
		return fmt.Errorf("the outbox schema is at version %d and this relay needs version %d: run `outbox migrate`", have, want)
	}
	return nil
}
