package store

import (
	"context"
	"time"
)

// sqlite is SQLite: "?" placeholders (numbered where an argument is used
// twice or out of order), lists passed as one JSON array read with
// json_each, times stored as text, and index hints, as its planner has no
// statistics to shape the plans for a big backlog by.
type sqlite struct{ plain }

// sqliteNow is the current time in the column representation.
const sqliteNow = "strftime('%Y-%m-%d %H:%M:%f', 'now')"

// sqliteUUID makes a random (version 4) UUID in SQLite, for rows whose
// message id the caller left out.
const sqliteUUID = "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))"

// sqliteShift is the current time plus (sign "+") or minus (sign "-") the
// microseconds in expr.
func sqliteShift(sign, expr string) string {
	return "strftime('%Y-%m-%d %H:%M:%f', 'now', '" + sign + "' || ((" + expr + ") / 1000000.0) || ' seconds')"
}

func (d sqlite) statements() statements {
	return singleForm(statements{messageStatements: d.messageStatements(), relayStatements: d.relayStatements(), adminStatements: d.adminStatements()})
}

// messageStatements are SQLite's statements of the hot path: insert, read,
// mark, settle, expire.
func (sqlite) messageStatements() messageStatements {
	insertOne := `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
VALUES (coalesce(?1, ` + sqliteUUID + `), ?2, ?3, ?4, ?5, coalesce(?6, 10),
        coalesce(strftime('%Y-%m-%d %H:%M:%f', ?8 / 1000000.0, 'unixepoch'), strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (?7 / 1000000.0) || ' seconds')))`
	// SQLite re-reads its clock between the rows a SELECT returns, so a
	// row passed over as "not yet due" could be due by the time a later
	// row of its key is checked, letting that row overtake it: the read
	// takes the clock once. Index hints walk pending rows in id order and
	// probe a key's waiting rows by key.
	//
	// No row written by plain SQL stalls the read (schema version 17
	// refuses most such rows; these hold for any): a payload longer than
	// the first argument's bytes is left out (NULL; octet_length reads
	// the length without the value), its length in bytes comes last; a
	// created_at that is not a time comes back NULL; an available_at that
	// is not a time (julianday NULL) is due, and one in another form
	// julianday reads ('T', a zone) is compared as the time it is; the
	// attempts are integers whatever was stored. Every row is of the one
	// partition, 0, whatever its partition_no says: it is read when the
	// partitions asked for include 0, and settled under that lease.
	read := `WITH clock AS MATERIALIZED (SELECT ` + sqliteNow + ` AS now)
SELECT m.id, m.message_id, m.topic, m.business_key, CASE WHEN octet_length(m.payload) <= ? THEN m.payload END,
       m.headers, CAST(m.attempts AS INTEGER), CAST(m.max_attempts AS INTEGER), 0, m.unknown_outcome,
       ((julianday(m.created_at) - 2440587.5) * 86400.0), octet_length(m.payload)
FROM outbox_messages AS m INDEXED BY outbox_messages_pending_idx
WHERE m.status = 'pending'
  AND (m.available_at <= (SELECT now FROM clock) OR coalesce(julianday(m.available_at), 0) <= julianday((SELECT now FROM clock)))
  AND EXISTS (SELECT 1 FROM json_each(?) WHERE value = 0)
  AND (m.expires_at IS NULL OR julianday(m.expires_at) > julianday((SELECT now FROM clock)))
  AND (m.business_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM outbox_messages AS b INDEXED BY outbox_messages_waiting_idx
      WHERE b.business_key = m.business_key AND b.status = 'pending' AND b.available_at > b.created_at AND b.business_key IS NOT NULL
        AND b.id < m.id AND b.available_at > (SELECT now FROM clock)
        AND (b.expires_at IS NULL OR julianday(b.expires_at) > julianday((SELECT now FROM clock)))))
ORDER BY m.id
LIMIT ?`
	// The outcomes are materialised first and the status test is kept off
	// the index ('+'), so the update walks the outcomes and looks each
	// row up by id instead of scanning pending rows. Every row is under
	// the lease of partition 0 (see read). A dead row's available_at is
	// its time of death (schema version 17). A row that expired while it
	// was being published takes the outcome it got, unless that is a
	// retry (schema version 19).
	settle := `WITH u AS MATERIALIZED (
    SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS status, json_extract(value, '$[2]') AS delay_us,
           json_extract(value, '$[3]') AS err, json_extract(value, '$[4]') AS inc, json_extract(value, '$[5]') AS unknown
    FROM json_each(?))
UPDATE outbox_messages SET
    attempts = attempts + u.inc,
    available_at = CASE WHEN u.status = 'pending' THEN strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (u.delay_us / 1000000.0) || ' seconds')
                        WHEN u.status = 'dead' THEN ` + sqliteNow + ` ELSE available_at END,
    sent_at = CASE WHEN u.status = 'sent' THEN ` + sqliteNow + ` ELSE sent_at END,
    last_error = CASE WHEN u.status = 'sent' THEN last_error ELSE u.err END,
    unknown_outcome = u.unknown,
    status = u.status
FROM u
WHERE outbox_messages.id = u.id
  AND (+outbox_messages.status = 'pending' OR (+outbox_messages.status = 'expired' AND u.status <> 'pending'))
  AND EXISTS (SELECT 1 FROM outbox_leases AS l WHERE l.partition_no = 0
              AND l.owner = ? AND l.expires_at > ` + sqliteNow + `)`
	return messageStatements{
		insert: `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
SELECT coalesce(json_extract(value, '$[0]'), ` + sqliteUUID + `),
       json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'),
       coalesce(json_extract(value, '$[5]'), 10),
       coalesce(strftime('%Y-%m-%d %H:%M:%f', json_extract(value, '$[7]') / 1000000.0, 'unixepoch'),
                strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (json_extract(value, '$[6]') / 1000000.0) || ' seconds'))
FROM json_each(?) ORDER BY key`,
		insertOne: insertOne,
		read:      read,
		settle:    settle,

		expire: `UPDATE outbox_messages INDEXED BY outbox_messages_expiring_idx SET
    last_error = '` + expiredReason + `' || CASE WHEN attempts > 0 THEN ' (' || attempts
        || iif(attempts = 1, ' attempt', ' attempts') || coalesce('; last error: ' || last_error, '') || ')' ELSE '' END,
    status = 'expired', available_at = ` + sqliteNow + `
WHERE status = 'pending' AND expires_at IS NOT NULL AND julianday(expires_at) <= julianday(` + sqliteNow + `)
  AND EXISTS (SELECT 1 FROM outbox_leases AS l WHERE l.partition_no = 0 AND l.owner = ? AND l.expires_at > ` + sqliteNow + `)`,
		// Marks that do not change are not written.
		markInflight: `UPDATE outbox_leases SET inflight_max_id = u.max_id
FROM (SELECT json_extract(value, '$[0]') AS p, json_extract(value, '$[1]') AS max_id FROM json_each(?)) AS u
WHERE outbox_leases.partition_no = u.p AND outbox_leases.owner = ? AND outbox_leases.inflight_max_id <> u.max_id`,
	}
}

// relayStatements are SQLite's statements of the relays' registry, leases
// and route health.
func (sqlite) relayStatements() relayStatements {
	return relayStatements{

		registerRelay: `INSERT INTO outbox_relays (relay_id, seen_at, routes, source) VALUES (?, ` + sqliteNow + `, ?, ?)
ON CONFLICT (relay_id) DO UPDATE SET seen_at = excluded.seen_at, routes = excluded.routes, source = excluded.source`,
		liveRelays:  `SELECT relay_id, routes FROM outbox_relays WHERE seen_at > ` + sqliteShift("-", "?") + ` AND source IS NULL ORDER BY relay_id`,
		relays:      relaysSQL("(julianday('now') - julianday(seen_at)) * 86400.0"),
		dropRelay:   `DELETE FROM outbox_relays WHERE relay_id = ?`,
		pruneRelays: `DELETE FROM outbox_relays WHERE seen_at < ` + sqliteShift("-", "?"),
		recordRoute: `INSERT INTO outbox_route_health (relay_id, route, state, since, reason) VALUES (?, ?, ?, ` + sqliteNow + `, ?)
ON CONFLICT (relay_id, route) DO UPDATE SET state = excluded.state, since = excluded.since, reason = excluded.reason`,
		routeHealth:     routeHealthSQL("(julianday('now') - julianday(h.since)) * 86400.0"),
		dropRouteHealth: dropRouteHealthSQL + "?",
		partitions:      partitionsSQL,
		acquire: `UPDATE outbox_leases SET
    prev_owner = owner,
    inflight_max_id = CASE WHEN owner IS NULL THEN 0 ELSE inflight_max_id END,
    owner = ?,
    expires_at = ` + sqliteShift("+", "?") + `
WHERE partition_no IN (SELECT value FROM json_each(?)) AND (owner IS NULL OR owner = ? OR expires_at <= ` + sqliteNow + `)`,
		held: `SELECT partition_no, inflight_max_id, coalesce(prev_owner, '') FROM outbox_leases WHERE owner = ? AND expires_at > ` + sqliteNow + ` ORDER BY partition_no`,
		renew: `UPDATE outbox_leases SET expires_at = ` + sqliteShift("+", "?") + `
WHERE owner = ? AND expires_at > ` + sqliteNow,
		release: `UPDATE outbox_leases SET owner = NULL, prev_owner = NULL, inflight_max_id = 0, expires_at = ` + sqliteNow + `
WHERE owner = ? AND partition_no IN (SELECT value FROM json_each(?))`,
		releaseAll: `UPDATE outbox_leases SET owner = NULL, prev_owner = NULL, inflight_max_id = 0, expires_at = ` + sqliteNow + `
WHERE owner = ?`,
	}
}

// adminStatements are SQLite's statements of the inbox, the operators'
// counts, the gauges and the schema's bookkeeping.
func (sqlite) adminStatements() adminStatements {
	return adminStatements{

		// Insert-first dedupe, as on PostgreSQL.
		inboxClaim: `INSERT INTO outbox_inbox (consumer, message_id) VALUES (?, ?) ON CONFLICT (consumer, message_id) DO NOTHING`,
		inboxPurge: `DELETE FROM outbox_inbox WHERE consumer = ? AND processed_at < ` + sqliteShift("-", "?"),

		countByStatusTopic: countByStatusTopicSQL,
		oldestPending:      `SELECT (julianday('now') - julianday(created_at)) * 86400.0 FROM outbox_messages WHERE status = 'pending' ORDER BY id LIMIT 1`,
		oldestDue:          sqliteOldestDue,
		now:                `SELECT ((julianday(` + sqliteNow + `) - 2440587.5) * 86400.0)`,
		gauges: `SELECT
  (SELECT count(*) FROM outbox_messages INDEXED BY outbox_messages_pending_idx WHERE status = 'pending'),
  (SELECT count(*) FROM outbox_messages INDEXED BY outbox_messages_status_topic_idx WHERE status = 'dead'),
  (SELECT (julianday('now') - julianday(created_at)) * 86400.0 FROM outbox_messages INDEXED BY outbox_messages_pending_idx
     WHERE status = 'pending' ORDER BY id LIMIT 1),
  (` + sqliteOldestDue + `),
  ((julianday('now') - 2440587.5) * 86400.0)`,

		migrationsTable: "CREATE TABLE IF NOT EXISTS outbox_schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT (" + sqliteNow + "))",
		tableExists:     "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
	}
}

// sqliteOldestDue reads the first due-rows index entry that has come.
const sqliteOldestDue = `SELECT (julianday('now') - julianday(min(available_at))) * 86400.0 FROM outbox_messages INDEXED BY outbox_messages_due_idx WHERE status = 'pending' AND available_at <= ` + sqliteNow

// sqliteDue is the predicate "the row has outlived its retention", with
// the sent and dead retentions in microseconds as its two arguments.
// Pending rows are never due; expired rows follow the dead retention,
// counted from available_at, which the expiry sets to their time of death.
const sqliteDue = "((status IN ('sent', 'consumed') AND coalesce(sent_at, created_at) < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || ((?) / 1000000.0) || ' seconds'))" +
	" OR (status IN ('dead', 'expired') AND max(created_at, available_at) < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || ((?) / 1000000.0) || ' seconds')))"

func (sqlite) retention() retentionStatements {
	return retentionStatements{
		window: `SELECT id, CASE WHEN ` + sqliteDue + ` THEN 1 ELSE 0 END,
       CASE WHEN created_at > ` + sqliteShift("-", "?") + ` THEN 1 ELSE 0 END
FROM outbox_messages WHERE id > ? ORDER BY id LIMIT ?`,
		remove: `DELETE FROM outbox_messages WHERE id IN (SELECT value FROM json_each(?)) AND ` + sqliteDue,
		// The transaction holds SQLite's write lock from its start, so
		// nothing changes between the copy and the delete.
		archive: `INSERT INTO outbox_messages_archive (` + archiveColumns + `)
SELECT ` + archiveColumns + ` FROM outbox_messages WHERE id IN (SELECT value FROM json_each(?)) AND ` + sqliteDue + `
RETURNING id`,
		purge: `DELETE FROM outbox_messages WHERE id IN (SELECT value FROM json_each(?))`,
	}
}

func (sqlite) now() string { return sqliteNow }

func (sqlite) epoch(col string) string { return "((julianday(" + col + ") - 2440587.5) * 86400.0)" }

func (sqlite) preview(col string, n int) string { return "substr(" + col + ", 1, " + itoa(n) + ")" }

func (sqlite) timeArg(t time.Time) (string, any) {
	return "{}", t.UTC().Format("2006-01-02 15:04:05.000")
}

func (sqlite) messageIDsIn(ids []string) (string, []any) {
	return "message_id IN (SELECT value FROM json_each({}))", []any{jsonList(ids)}
}

func (sqlite) messageIDTextIn(ids []string) (string, []any) {
	return "message_id IN (SELECT value FROM json_each({}))", []any{jsonList(ids)}
}

func (sqlite) idsIn(ids []int64) (string, []any) {
	return "id IN (SELECT value FROM json_each({}))", []any{jsonList(ids)}
}

// searchStatus: with no statistics to choose by, SQLite is told how to
// walk. Pending rows: the pending index backwards instead of sorting every
// pending row. Other statuses without a topic: ids backwards, stopping at
// the limit, instead of the (status, topic) index, which would make it
// sort every row of the status.
func (sqlite) searchStatus(status string, pending, byTopic bool) (string, string) {
	switch {
	case byTopic:
		return "", "status = " + status
	case pending:
		return " INDEXED BY outbox_messages_pending_idx", "status = " + status
	}
	return "", "+status = " + status
}

// archive copies the due rows and deletes them in one transaction, which
// holds the write lock from its start.
func (sqlite) archive(ctx context.Context, st *Store, s retentionStatements, ids []int64, sent, dead int64) (int64, error) {
	return archiveInTx(ctx, st, s, s.archive, "", ids, sent, dead)
}

// lockMigrations needs no lock: SQLite serialises writers itself.
func (sqlite) lockMigrations(context.Context, Session) (func(), error) { return func() {}, nil }
