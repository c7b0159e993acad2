package store

import (
	"context"
	"math"
	"strings"
	"time"
)

// postgres is PostgreSQL: numbered placeholders, arrays as list
// arguments, uuid and jsonb columns, and the relay's read and settle in
// functions whose plans are kept per connection (005_cached_plans.sql).
type postgres struct{}

func (d postgres) statements() statements {
	return statements{messageStatements: d.messageStatements(), relayStatements: d.relayStatements(), adminStatements: d.adminStatements()}
}

// messageStatements are PostgreSQL's statements of the hot path: insert, read,
// mark, settle, expire.
func (postgres) messageStatements() messageStatements {
	insertFresh := `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
VALUES ($1::uuid, $2, $3, $4, $5::jsonb, coalesce($6::int, 10), coalesce($8::timestamptz, now() + $7::bigint * interval '1 microsecond'))`
	return messageStatements{
		insert: `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
SELECT u.message_id, u.topic, u.business_key, u.payload, u.headers::jsonb, coalesce(u.max_attempts, 10),
       coalesce(u.not_before, now() + u.delay_us * interval '1 microsecond')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::bigint[], $8::timestamptz[])
     AS u(message_id, topic, business_key, payload, headers, max_attempts, delay_us, not_before)
ON CONFLICT (message_id) DO NOTHING
RETURNING message_id::text`,
		// A duplicate id the caller chose must not abort the caller's
		// transaction: it is skipped, and reported.
		insertOne: insertFresh + `
ON CONFLICT (message_id) DO NOTHING`,
		insertFresh: insertFresh,
		// The read of migrations 4, 5, 17 and 19, in a function that pins its
		// plan to the indexes and keeps it (see 005_cached_plans.sql); its
		// body is readInline. The payload comes back NULL when it is longer
		// than $1 bytes, and its length last: octet_length takes it from
		// the stored value's header, without loading a TOASTed payload.
		read: `SELECT * FROM outbox_read($2::int[], $3, $1::bigint)`,
		// read and markInflight in one call (010_read_mark.sql, 017).
		readMark: `SELECT * FROM outbox_read_mark($2::int[], $3, $4, $1::bigint)`,
		readInline: `SELECT m.id, m.message_id::text, m.topic, m.business_key, CASE WHEN octet_length(m.payload) <= $1::bigint THEN m.payload END,
       m.headers::text, m.attempts, m.max_attempts, m.partition_no, m.unknown_outcome, extract(epoch from m.created_at)::float8,
       octet_length(m.payload)::bigint
FROM outbox_messages AS m
WHERE m.status = 'pending' AND m.available_at <= now() AND m.partition_no = ANY($2::int[])
  AND (m.expires_at IS NULL OR m.expires_at > now())
  AND (m.business_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM outbox_messages AS b
      WHERE b.business_key = m.business_key AND b.status = 'pending' AND b.available_at > b.created_at AND b.business_key IS NOT NULL
        AND b.id < m.id AND b.available_at > now() AND (b.expires_at IS NULL OR b.expires_at > now())))
ORDER BY m.id
LIMIT $3`,
		// The relay runs settleInline as the body of outbox_settle
		// (005_cached_plans.sql), planned once per connection.
		settle: `SELECT outbox_settle($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::bool[], $7)`,
		// settle, then readMark, in one call (014_settle_read_mark.sql, 017).
		settleReadMark: `SELECT * FROM outbox_settle_read_mark($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::bool[], $7, $8::int[], $9, $10::bigint)`,
		// The lease check is a per-row subquery: as a join, the planner may
		// start from the lease table and probe every outcome per partition.
		// The status is compared in the "C" collation (equal to the
		// default for equality) so that no partial index on pending rows
		// matches: the rows are looked up by id, whatever the statistics
		// said when the function planned it (012_settle_by_id.sql). A
		// dead row's available_at is its time of death (017). A row that
		// expired while it was being published takes the outcome it got,
		// unless that is a retry (019).
		settleInline: `UPDATE outbox_messages AS m SET
    attempts = m.attempts + u.inc,
    available_at = CASE WHEN u.status = 'pending' THEN now() + u.delay_us * interval '1 microsecond'
                        WHEN u.status = 'dead' THEN now() ELSE m.available_at END,
    sent_at = CASE WHEN u.status = 'sent' THEN now() ELSE m.sent_at END,
    last_error = CASE WHEN u.status = 'sent' THEN m.last_error ELSE u.err END,
    unknown_outcome = u.unknown,
    status = u.status
FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::bool[]) AS u(id, status, delay_us, err, inc, unknown)
WHERE m.id = u.id AND (m.status COLLATE "C" = 'pending' OR (m.status COLLATE "C" = 'expired' AND u.status <> 'pending'))
  AND (SELECT l.owner = $7 AND l.expires_at > now() FROM outbox_leases AS l WHERE l.partition_no = m.partition_no)`,

		// The expiring rows through their index (019_expires_at.sql).
		expire: postgresExpire(""),
		// Marks that do not change are not written: most partitions of a
		// round hold nothing in flight, round after round. The rows are
		// locked in partition order, as the renewal and outbox_read_mark
		// lock them. Like the settle, a mark commits without waiting for
		// the WAL flush (set_config, local to its transaction): a mark
		// lost to a database crash only means its messages are published
		// again without being suspected or checked first.
		markInflight: `WITH locked AS MATERIALIZED (
    SELECT l.partition_no AS p, u.max_id FROM outbox_leases AS l
    JOIN unnest($1::int[], $2::bigint[]) AS u(p, max_id) ON l.partition_no = u.p
    WHERE l.owner = $3 AND l.inflight_max_id <> u.max_id
    ORDER BY l.partition_no
    FOR UPDATE OF l
)
UPDATE outbox_leases AS l SET inflight_max_id = locked.max_id
FROM locked
WHERE l.partition_no = locked.p
  AND set_config('synchronous_commit', 'off', true) IS NOT NULL`,
	}
}

// relayStatements are PostgreSQL's statements of the relays' registry, leases
// and route health.
func (postgres) relayStatements() relayStatements {
	return relayStatements{

		registerRelay: `INSERT INTO outbox_relays (relay_id, seen_at, routes, source) VALUES ($1, now(), $2, $3)
ON CONFLICT (relay_id) DO UPDATE SET seen_at = now(), routes = excluded.routes, source = excluded.source`,
		liveRelays:  `SELECT relay_id, routes FROM outbox_relays WHERE seen_at > now() - ($1)::bigint * interval '1 microsecond' AND source IS NULL ORDER BY relay_id`,
		relays:      relaysSQL("extract(epoch from now() - seen_at)::float8"),
		dropRelay:   `DELETE FROM outbox_relays WHERE relay_id = $1`,
		pruneRelays: `DELETE FROM outbox_relays WHERE seen_at < now() - ($1)::bigint * interval '1 microsecond'`,
		recordRoute: `INSERT INTO outbox_route_health (relay_id, route, state, since, reason) VALUES ($1, $2, $3, now(), $4)
ON CONFLICT (relay_id, route) DO UPDATE SET state = excluded.state, since = excluded.since, reason = excluded.reason`,
		routeHealth:     routeHealthSQL("extract(epoch from now() - h.since)::float8"),
		dropRouteHealth: dropRouteHealthSQL + "$1",
		partitions:      partitionsSQL,
		acquire: `UPDATE outbox_leases SET
    prev_owner = owner,
    inflight_max_id = CASE WHEN owner IS NULL THEN 0 ELSE inflight_max_id END,
    owner = $1,
    expires_at = now() + ($2)::bigint * interval '1 microsecond'
WHERE partition_no = ANY($3::int[]) AND (owner IS NULL OR owner = $4 OR expires_at <= now())`,
		held: `SELECT partition_no, inflight_max_id, coalesce(prev_owner, '') FROM outbox_leases WHERE owner = $1 AND expires_at > now() ORDER BY partition_no`,
		// The rows are locked in partition order, as outbox_read_mark
		// locks the ones it writes: locks taken in different orders can
		// deadlock, which PostgreSQL finds only after deadlock_timeout
		// (1 s), a second the relay's reads would stall.
		renew: `UPDATE outbox_leases SET expires_at = now() + ($1)::bigint * interval '1 microsecond'
WHERE partition_no IN (SELECT partition_no FROM outbox_leases WHERE owner = $2 AND expires_at > now() ORDER BY partition_no FOR UPDATE)`,
		release: `UPDATE outbox_leases SET owner = NULL, prev_owner = NULL, inflight_max_id = 0, expires_at = now()
WHERE owner = $1 AND partition_no = ANY($2::int[])`,
		releaseAll: `UPDATE outbox_leases SET owner = NULL, prev_owner = NULL, inflight_max_id = 0, expires_at = now()
WHERE owner = $1`,
	}
}

// adminStatements are PostgreSQL's statements of the inbox, the operators'
// counts, the gauges and the schema's bookkeeping.
func (postgres) adminStatements() adminStatements {
	return adminStatements{

		// Insert-first dedupe: a concurrent second claim of the same id
		// waits on the primary key until the first transaction ends, then
		// finds the row (0 rows affected) or, after a rollback, takes it.
		inboxClaim: `INSERT INTO outbox_inbox (consumer, message_id) VALUES ($1, $2) ON CONFLICT (consumer, message_id) DO NOTHING`,
		inboxPurge: `DELETE FROM outbox_inbox WHERE consumer = $1 AND processed_at < now() - ($2)::bigint * interval '1 microsecond'`,

		countByStatusTopic: countByStatusTopicSQL,
		oldestPending:      `SELECT extract(epoch from now() - created_at)::float8 FROM outbox_messages WHERE status = 'pending' ORDER BY id LIMIT 1`,
		oldestDue:          postgresOldestDue,
		now:                `SELECT extract(epoch from now())::float8`,
		gauges: `SELECT
  (SELECT count(*) FROM outbox_messages WHERE status = 'pending'),
  (SELECT count(*) FROM outbox_messages WHERE status = 'dead'),
  (SELECT extract(epoch from now() - created_at)::float8 FROM outbox_messages WHERE status = 'pending' ORDER BY id LIMIT 1),
  (` + postgresOldestDue + `),
  extract(epoch from now())::float8`,

		migrationsTable: "CREATE TABLE IF NOT EXISTS outbox_schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
		tableExists:     "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1",
	}
}

// postgresOldestDue reads the first due-rows index entry that has come;
// the index is on available_at in UTC (migration 6).
const postgresOldestDue = `SELECT extract(epoch from (now() AT TIME ZONE 'UTC') - min(available_at AT TIME ZONE 'UTC'))::float8
  FROM outbox_messages WHERE status = 'pending' AND (available_at AT TIME ZONE 'UTC') <= (now() AT TIME ZONE 'UTC')`

func (postgres) retention() retentionStatements {
	return postgresRetentionOn("outbox_messages", false)
}

// postgresDue is the predicate "the row has outlived its retention", with
// the sent and dead retentions in microseconds at placeholders sent and
// dead. Pending rows are never due. Expired rows follow the dead
// retention: the expiry sets available_at to their time of death, as the
// settle does for dead rows. With snapshot, a pending row of the snapshot
// domain that its partition's cursor has passed is sent (see
// WithSnapshotRead), due by its created_at.
func postgresDue(sent, dead string, snapshot bool) string {
	due := "((status IN ('sent', 'consumed') AND coalesce(sent_at, created_at) < now() - (" + sent + ")::bigint * interval '1 microsecond')" +
		" OR (status IN ('dead', 'expired') AND greatest(created_at, available_at) < now() - (" + dead + ")::bigint * interval '1 microsecond')"
	if snapshot {
		due += " OR (status = 'pending' AND outbox_txid IS NOT NULL AND created_at < now() - (" + sent + ")::bigint * interval '1 microsecond'" +
			" AND outbox_delivered(partition_no, outbox_txid, id))"
	}
	return due + ")"
}

// postgresRetentionOn are the retention statements over table, a checked
// and quoted name: outbox_messages, or one of its partitions; snapshot
// for a database read by snapshots.
func postgresRetentionOn(table string, snapshot bool) retentionStatements {
	remove := `DELETE FROM ` + table + ` WHERE id = ANY($1::bigint[]) AND ` + postgresDue("$2", "$3", snapshot)
	archived := archiveColumns
	if snapshot {
		// A pending row that is removed was delivered.
		archived = strings.Replace(archiveColumns, "status", "CASE WHEN status = 'pending' THEN 'sent' ELSE status END", 1)
	}
	return retentionStatements{
		window: `SELECT id, CASE WHEN ` + postgresDue("$1", "$2", snapshot) + ` THEN 1 ELSE 0 END,
       CASE WHEN created_at > now() - ($3)::bigint * interval '1 microsecond' THEN 1 ELSE 0 END
FROM ` + table + ` WHERE id > $4 ORDER BY id LIMIT $5`,
		remove: remove,
		// One statement: a row is either still in outbox_messages or in
		// the archive, never both and never neither. A row requeued
		// meanwhile is re-checked against its new version and stays.
		move: `WITH gone AS (
    ` + remove + `
    RETURNING ` + archiveColumns + `)
INSERT INTO outbox_messages_archive (` + archiveColumns + `)
SELECT ` + archived + ` FROM gone`,
	}
}

func (postgres) ph(n int) string { return "$" + itoa(n) }

func (postgres) now() string { return "now()" }

func (postgres) pool(db Querier) Querier { return db }

func (postgres) epoch(col string) string { return "extract(epoch from " + col + ")::float8" }

func (postgres) text(col string) string { return col + "::text" }

func (postgres) falseSQL() string { return "false" }

func (postgres) preview(col string, n int) string { return "left(" + col + ", " + itoa(n) + ")" }

func (postgres) msgIDEq() string { return "message_id = {}::uuid" }

func (postgres) timeArg(t time.Time) (string, any) { return "{}::timestamptz", t.UTC() }

func (postgres) createdRange(since, until time.Time) (time.Time, time.Time, bool) {
	return since, until, false
}

func (postgres) messageIDsIn(ids []string) (string, []any) {
	return "message_id = ANY({}::uuid[])", []any{ids}
}

func (postgres) messageIDTextIn(ids []string) (string, []any) {
	return "message_id::text = ANY({}::text[])", []any{ids}
}

func (postgres) idsIn(ids []int64) (string, []any) { return "id = ANY({}::bigint[])", []any{ids} }

func (postgres) searchStatus(status string, _, _ bool) (string, string) {
	return "", "status = " + status
}

func (postgres) intList(v []int) any {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func (postgres) idList(v []int64) any { return v }

func (postgres) insertOneArgs(m *NewMessage) []any {
	args := oneArgs(m)
	if !m.NotBefore.IsZero() {
		args[7] = m.NotBefore
	}
	return args
}

// insertBatch passes one array per column; the statement returns the ids
// it inserted, so the duplicates are the ids it did not return.
func (postgres) insertBatch(ctx context.Context, q Querier, stmt string, msgs []NewMessage) error {
	n := len(msgs)
	ids, topics, keys, payloads, headers := make([]string, n), make([]string, n), make([]*string, n), make([]string, n), make([]string, n)
	maxes, delays, notBefore := make([]*int32, n), make([]int64, n), make([]*time.Time, n)
	for i, m := range msgs {
		ids[i], topics[i], payloads[i], headers[i] = m.MessageID, m.Topic, m.Payload, m.Headers
		if m.Key != "" {
			keys[i] = &msgs[i].Key
		}
		if m.MaxAttempts > 0 {
			v := int32(min(m.MaxAttempts, math.MaxInt32))
			maxes[i] = &v
		}
		delays[i] = m.Delay.Microseconds()
		if !m.NotBefore.IsZero() {
			t := m.NotBefore
			notBefore[i] = &t
		}
	}
	rows, err := q.Query(ctx, stmt, ids, topics, keys, payloads, headers, maxes, delays, notBefore)
	if err != nil {
		return err
	}
	inserted := make(map[string]bool, n)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		inserted[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(inserted) != n {
		var dup []string
		for _, id := range ids {
			if !inserted[id] {
				dup = append(dup, id)
			}
		}
		return &DuplicateError{MessageIDs: dup}
	}
	return nil
}

// settle calls outbox_settle with one array per outcome field; the
// function returns the count.
func (d postgres) settle(ctx context.Context, q Querier, stmt, owner string, outs []Outcome) (int64, error) {
	rows, err := q.Query(ctx, stmt, append(d.settleArgs(outs), owner)...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var changed int64
	if rows.Next() {
		err = rows.Scan(&changed)
	}
	if err == nil {
		err = rows.Err()
	}
	return changed, err
}

// settleArgs are the outcome arrays of outbox_settle.
func (postgres) settleArgs(outs []Outcome) []any {
	n := len(outs)
	ids, statuses, delays, errs, incs, unknowns := make([]int64, n), make([]string, n), make([]int64, n), make([]*string, n), make([]int32, n), make([]bool, n)
	for i, o := range outs {
		ids[i], statuses[i], delays[i], unknowns[i] = o.ID, o.Status, o.Delay.Microseconds(), o.Unknown
		if o.Error != "" {
			errs[i] = &outs[i].Error
		}
		if o.CountAttempt {
			incs[i] = 1
		}
	}
	return []any{ids, statuses, delays, errs, incs, unknowns}
}

func (postgres) inflightArgs(owner string, parts []int, maxIDs []int64) ([]any, error) {
	ps := make([]int32, len(parts))
	for i, p := range parts {
		ps[i] = int32(p)
	}
	return []any{ps, maxIDs, owner}, nil
}

// archive is one statement (see postgresRetentionOn).
func (postgres) archive(ctx context.Context, st *Store, s retentionStatements, ids []int64, sent, dead int64) (int64, error) {
	return st.db.Exec(ctx, s.move, ids, sent, dead)
}

// lockMigrations takes a session-level advisory lock.
func (postgres) lockMigrations(ctx context.Context, s Session) (func(), error) {
	if _, err := s.Exec(ctx, "SELECT pg_advisory_lock(7433001)"); err != nil {
		return nil, err
	}
	return func() { _, _ = s.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7433001)") }, nil
}

// postgresExpire moves the expiring rows of the partitions $1 leases to
// 'expired', through their index (019_expires_at.sql); and is more of
// the condition (" AND …"), or "".
func postgresExpire(and string) string {
	return `UPDATE outbox_messages AS m SET
    last_error = '` + expiredReason + `' || CASE WHEN m.attempts > 0 THEN ' (' || m.attempts
        || CASE WHEN m.attempts = 1 THEN ' attempt' ELSE ' attempts' END || coalesce('; last error: ' || m.last_error, '') || ')' ELSE '' END,
    status = 'expired', available_at = now()
WHERE m.status = 'pending' AND m.expires_at IS NOT NULL AND m.expires_at <= now()` + and + `
  AND m.partition_no IN (SELECT l.partition_no FROM outbox_leases AS l WHERE l.owner = $1 AND l.expires_at > now())`
}
