package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// mysql is MySQL and MariaDB: "?" placeholders, lists passed as one JSON
// array read with JSON_TABLE, and index hints, as its planner has no
// statistics to shape the plans for a big backlog by.
type mysql struct{ plain }

// mysqlIDs is a table of the row ids in a JSON array argument.
const mysqlIDs = "JSON_TABLE(?, '$[*]' COLUMNS (v BIGINT PATH '$')) AS u"

// mysqlInts is "is one of the ints in a JSON array argument".
const mysqlInts = " IN (SELECT v FROM JSON_TABLE(?, '$[*]' COLUMNS (v BIGINT PATH '$')) AS jt)"

func (d mysql) statements() statements {
	return singleForm(statements{messageStatements: d.messageStatements(), relayStatements: d.relayStatements(), adminStatements: d.adminStatements()})
}

// messageStatements are MySQL's statements of the hot path: insert, read,
// mark, settle, expire.
func (mysql) messageStatements() messageStatements {
	insertOne := `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
VALUES (?, ?, ?, ?, ?, COALESCE(?, 10), COALESCE(FROM_UNIXTIME(? / 1000000), NOW(6) + INTERVAL ? MICROSECOND))`
	// Index hints keep the plan shaped for a big backlog: walk pending
	// rows in id order, and probe a key's waiting rows by key. The walk
	// passes the rows of other workers' partitions too; FIND_IN_SET over
	// the JSON array's digits tests each entry's partition in the index
	// (which holds it since schema version 15), so only the worker's own
	// rows are looked up, where a JSON_TABLE semi-join costs a lookup per
	// row (two to three times the whole read, for a worker reading a
	// quarter of the partitions).
	// A key's waiting rows are probed only when its latest pending row
	// (one index entry, read backwards) is not due yet. That probe reads
	// the key's pending rows backwards from the latest too, and stops at
	// the first one that is either due or an earlier waiting row: as the
	// rows that have not come yet sort after the due ones, the row it
	// stops at holds the row back iff it has not come yet. The planner
	// bounds the probe by the key only (a correlated subquery gets no
	// range on available_at after it), so a probe that looked for the
	// earlier waiting row among the key's rows in index order walked
	// every due row of the key first: a key with N due rows behind a
	// retried head cost N² entries per read (5,000 rows: 3.4 s). Walking
	// backwards, a probe passes only the key's not-yet-due rows that
	// come after the row probed, one for a head waiting out its backoff;
	// the index holds created_at (schema version 13), so it reads no
	// row on the way.
	// A payload longer than the first argument's bytes is left out (NULL),
	// its length in bytes comes last: the server still reads the value to
	// measure it, the relay never receives it. A zero created_at (a zero
	// date, where sql_mode lets one in) comes back NULL:
	// unknown.
	read := `SELECT m.id, m.message_id, m.topic, m.business_key, CASE WHEN LENGTH(m.payload) <= ? THEN m.payload END,
       m.headers, m.attempts, m.max_attempts, m.partition_no, m.unknown_outcome, NULLIF(UNIX_TIMESTAMP(m.created_at), 0), LENGTH(m.payload)
FROM outbox_messages AS m FORCE INDEX (outbox_messages_pending_idx)
WHERE m.status = 'pending' AND m.available_at <= NOW(6) AND FIND_IN_SET(m.partition_no, TRIM(BOTH ']' FROM TRIM(BOTH '[' FROM ?)))
  AND (m.expires_at IS NULL OR m.expires_at > NOW(6))
  AND (m.business_key IS NULL OR (
      SELECT b.available_at FROM outbox_messages AS b FORCE INDEX (outbox_messages_waiting_idx)
      WHERE b.business_key = m.business_key AND b.status = 'pending'
      ORDER BY b.available_at DESC LIMIT 1) <= NOW(6) OR COALESCE((
      SELECT b.available_at FROM outbox_messages AS b FORCE INDEX (outbox_messages_waiting_idx)
      WHERE b.business_key = m.business_key AND b.status = 'pending'
        AND (b.available_at <= NOW(6) OR b.id < m.id AND b.available_at > b.created_at)
      ORDER BY b.available_at DESC LIMIT 1), NOW(6)) <= NOW(6))
ORDER BY m.id
LIMIT ?`
	// A dead row's available_at is its time of death (schema version 17).
	// A row that expired while it was being published takes the outcome
	// it got, unless that is a retry (schema version 19). The settle reads lease rows with shared locks (a multi-table
	// UPDATE does, even at READ COMMITTED), one outcome after the other:
	// the join is pinned to the outcomes' order, which settle sorts by
	// partition, the order in which renewals and takeovers lock them.
	settle := `UPDATE JSON_TABLE(?, '$[*]' COLUMNS (
    id BIGINT PATH '$[0]', status VARCHAR(16) PATH '$[1]', delay_us BIGINT PATH '$[2]',
    err TEXT PATH '$[3]', inc INT PATH '$[4]', unknown INT PATH '$[5]')) AS u
STRAIGHT_JOIN outbox_messages AS m ON m.id = u.id
STRAIGHT_JOIN outbox_leases AS l ON l.partition_no = m.partition_no
SET m.attempts = m.attempts + u.inc,
    m.available_at = CASE WHEN u.status = 'pending' THEN NOW(6) + INTERVAL u.delay_us MICROSECOND
                          WHEN u.status = 'dead' THEN NOW(6) ELSE m.available_at END,
    m.sent_at = CASE WHEN u.status = 'sent' THEN NOW(6) ELSE m.sent_at END,
    m.last_error = CASE WHEN u.status = 'sent' THEN m.last_error ELSE u.err END,
    m.unknown_outcome = u.unknown,
    m.status = u.status
WHERE (m.status = 'pending' OR (m.status = 'expired' AND u.status <> 'pending')) AND l.owner = ? AND l.expires_at > NOW(6)`
	return messageStatements{
		insert: `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
SELECT u.message_id, u.topic, u.business_key, u.payload, u.headers, COALESCE(u.max_attempts, 10),
       COALESCE(FROM_UNIXTIME(u.not_before_us / 1000000), NOW(6) + INTERVAL u.delay_us MICROSECOND)
FROM JSON_TABLE(?, '$[*]' COLUMNS (
    message_id VARCHAR(36) PATH '$[0]', topic VARCHAR(255) PATH '$[1]', business_key VARCHAR(255) PATH '$[2]',
    payload LONGTEXT PATH '$[3]', headers TEXT PATH '$[4]', max_attempts INT PATH '$[5]',
    delay_us BIGINT PATH '$[6]', not_before_us BIGINT PATH '$[7]')) AS u`,
		insertOne: insertOne,
		read:      read,
		settle:    settle,

		// MySQL assigns left to right with the new values: last_error is
		// written while the row still holds its old values.
		expire: `UPDATE outbox_messages AS m FORCE INDEX (outbox_messages_expiring_idx)
JOIN outbox_leases AS l ON l.partition_no = m.partition_no
SET m.last_error = CONCAT('` + expiredReason + `', CASE WHEN m.attempts > 0 THEN CONCAT(' (', m.attempts,
        IF(m.attempts = 1, ' attempt', ' attempts'), COALESCE(CONCAT('; last error: ', m.last_error), ''), ')') ELSE '' END),
    m.status = 'expired', m.available_at = NOW(6)
WHERE m.status = 'pending' AND m.expires_at <= NOW(6) AND l.owner = ? AND l.expires_at > NOW(6)`,
		// Marks that do not change are not written.
		markInflight: `UPDATE outbox_leases AS l
JOIN JSON_TABLE(?, '$[*]' COLUMNS (p INT PATH '$[0]', max_id BIGINT PATH '$[1]')) AS u ON l.partition_no = u.p
SET l.inflight_max_id = u.max_id
WHERE l.owner = ? AND l.inflight_max_id <> u.max_id`,
	}
}

// relayStatements are MySQL's statements of the relays' registry, leases
// and route health.
func (mysql) relayStatements() relayStatements {
	return relayStatements{

		registerRelay: `INSERT INTO outbox_relays (relay_id, seen_at, routes, source) VALUES (?, NOW(6), ?, ?)
ON DUPLICATE KEY UPDATE seen_at = NOW(6), routes = VALUES(routes), source = VALUES(source)`,
		liveRelays:  `SELECT relay_id, routes FROM outbox_relays WHERE seen_at > NOW(6) - INTERVAL (?) MICROSECOND AND source IS NULL ORDER BY relay_id`,
		relays:      relaysSQL("TIMESTAMPDIFF(MICROSECOND, seen_at, NOW(6)) / 1000000.0"),
		dropRelay:   `DELETE FROM outbox_relays WHERE relay_id = ?`,
		pruneRelays: `DELETE FROM outbox_relays WHERE seen_at < NOW(6) - INTERVAL (?) MICROSECOND`,
		recordRoute: `INSERT INTO outbox_route_health (relay_id, route, state, since, reason) VALUES (?, ?, ?, NOW(6), ?)
ON DUPLICATE KEY UPDATE state = VALUES(state), since = VALUES(since), reason = VALUES(reason)`,
		routeHealth:     routeHealthSQL("TIMESTAMPDIFF(MICROSECOND, h.since, NOW(6)) / 1000000.0"),
		dropRouteHealth: dropRouteHealthSQL + "?",
		partitions:      partitionsSQL,
		// MySQL evaluates SET left to right with the new values: the old
		// owner is read before it is overwritten.
		acquire: `UPDATE outbox_leases SET
    prev_owner = owner,
    inflight_max_id = CASE WHEN owner IS NULL THEN 0 ELSE inflight_max_id END,
    owner = ?,
    expires_at = NOW(6) + INTERVAL (?) MICROSECOND
WHERE partition_no` + mysqlInts + ` AND (owner IS NULL OR owner = ? OR expires_at <= NOW(6))`,
		held: `SELECT partition_no, inflight_max_id, coalesce(prev_owner, '') FROM outbox_leases WHERE owner = ? AND expires_at > NOW(6) ORDER BY partition_no`,
		renew: `UPDATE outbox_leases SET expires_at = NOW(6) + INTERVAL (?) MICROSECOND
WHERE owner = ? AND expires_at > NOW(6)`,
		release: `UPDATE outbox_leases SET owner = NULL, prev_owner = NULL, inflight_max_id = 0, expires_at = NOW(6)
WHERE owner = ? AND partition_no` + mysqlInts,
		releaseAll: `UPDATE outbox_leases SET owner = NULL, prev_owner = NULL, inflight_max_id = 0, expires_at = NOW(6)
WHERE owner = ?`,
	}
}

// adminStatements are MySQL's statements of the inbox, the operators'
// counts, the gauges and the schema's bookkeeping.
func (mysql) adminStatements() adminStatements {
	return adminStatements{

		// Insert-first dedupe, as on PostgreSQL.
		inboxClaim: `INSERT INTO outbox_inbox (consumer, message_id) VALUES (?, ?) ON DUPLICATE KEY UPDATE consumer = consumer`,
		inboxPurge: `DELETE FROM outbox_inbox WHERE consumer = ? AND processed_at < NOW(6) - INTERVAL (?) MICROSECOND`,

		countByStatusTopic: countByStatusTopicSQL,
		oldestPending:      `SELECT TIMESTAMPDIFF(MICROSECOND, created_at, NOW(6)) / 1000000.0 FROM outbox_messages WHERE status = 'pending' ORDER BY id LIMIT 1`,
		oldestDue:          mysqlOldestDue,
		now:                `SELECT UNIX_TIMESTAMP(NOW(6))`,
		gauges: `SELECT
  (SELECT count(*) FROM outbox_messages FORCE INDEX (outbox_messages_pending_idx) WHERE status = 'pending'),
  (SELECT count(*) FROM outbox_messages FORCE INDEX (outbox_messages_status_topic_idx) WHERE status = 'dead'),
  (SELECT TIMESTAMPDIFF(MICROSECOND, created_at, NOW(6)) / 1000000.0 FROM outbox_messages FORCE INDEX (outbox_messages_pending_idx)
     WHERE status = 'pending' ORDER BY id LIMIT 1),
  (` + mysqlOldestDue + `),
  UNIX_TIMESTAMP(NOW(6))`,

		migrationsTable: "CREATE TABLE IF NOT EXISTS outbox_schema_migrations (version INT NOT NULL PRIMARY KEY, applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB",
		tableExists:     "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
	}
}

// mysqlOldestDue reads the first due-rows index entry that has come.
const mysqlOldestDue = `SELECT TIMESTAMPDIFF(MICROSECOND, MIN(available_at), NOW(6)) / 1000000.0 FROM outbox_messages FORCE INDEX (outbox_messages_due_idx) WHERE status = 'pending' AND available_at <= NOW(6)`

// mysqlDue is the predicate "row m has outlived its retention", with the
// sent and dead retentions in microseconds as its two arguments. Pending
// rows are never due; expired rows follow the dead retention, counted from
// available_at, which the expiry sets to their time of death.
func mysqlDue(m string) string {
	return "((" + m + "status IN ('sent', 'consumed') AND coalesce(" + m + "sent_at, " + m + "created_at) < NOW(6) - INTERVAL (?) MICROSECOND)" +
		" OR (" + m + "status IN ('dead', 'expired') AND GREATEST(" + m + "created_at, " + m + "available_at) < NOW(6) - INTERVAL (?) MICROSECOND))"
}

func (mysql) retention() retentionStatements {
	// A multi-table DELETE joins the id list (MariaDB runs a single-
	// table DELETE … IN (subquery) as a scan of the whole table), and
	// the join starts from the list and looks each row up by primary
	// key: left to itself, the planner may walk the status index
	// instead, over every settled row.
	byID := mysqlIDs + ` STRAIGHT_JOIN outbox_messages AS m FORCE INDEX (PRIMARY) ON m.id = u.v`
	return retentionStatements{
		window: `SELECT id, CASE WHEN ` + mysqlDue("") + ` THEN 1 ELSE 0 END,
       CASE WHEN created_at > NOW(6) - INTERVAL (?) MICROSECOND THEN 1 ELSE 0 END
FROM outbox_messages WHERE id > ? ORDER BY id LIMIT ?`,
		remove: `DELETE m FROM ` + byID + ` WHERE ` + mysqlDue("m."),
		lock:   `SELECT m.id FROM ` + byID + ` WHERE ` + mysqlDue("m.") + ` ORDER BY m.id FOR UPDATE`,
		archive: `INSERT INTO outbox_messages_archive (` + archiveColumns + `)
SELECT m.id, m.message_id, m.topic, m.business_key, m.payload, m.headers, m.status, m.attempts, m.max_attempts, m.available_at, m.created_at, m.sent_at, m.consumed_at, m.last_error, m.unknown_outcome
FROM ` + byID,
		purge: `DELETE m FROM ` + byID,
	}
}

// settle passes the outcomes sorted by partition, then id: the statement
// locks their lease rows in that order, as renewals, takeovers and marks
// do, and two relays' statements never wait for each other in a cycle.
func (d mysql) settle(ctx context.Context, q Querier, stmt, owner string, outs []Outcome) (int64, error) {
	sorted := slices.Clone(outs)
	slices.SortFunc(sorted, func(a, b Outcome) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.ID, b.ID))
	})
	return d.plain.settle(ctx, q, stmt, owner, sorted)
}

// inflightArgs passes the marks sorted by partition: the statement
// writes their lease rows in the order of the array.
func (d mysql) inflightArgs(owner string, parts []int, maxIDs []int64) ([]any, error) {
	idx := make([]int, len(parts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(parts[a], parts[b]) })
	sp, sm := make([]int, len(parts)), make([]int64, len(parts))
	for i, j := range idx {
		sp[i], sm[i] = parts[j], maxIDs[j]
	}
	return d.plain.inflightArgs(owner, sp, sm)
}

func (mysql) now() string { return "NOW(6)" }

func (mysql) epoch(col string) string { return "UNIX_TIMESTAMP(" + col + ")" }

func (mysql) preview(col string, n int) string { return "left(" + col + ", " + itoa(n) + ")" }

// timeArg passes t as a decimal of seconds: it keeps every microsecond,
// where a float would round them.
func (mysql) timeArg(t time.Time) (string, any) {
	us := t.UnixMicro()
	s := strconv.FormatInt(us/1e6, 10) + "." + leftPad(strconv.FormatInt(us%1e6, 10), 6)
	if us < 0 {
		s = strconv.FormatFloat(float64(us)/1e6, 'f', 6, 64)
	}
	return "FROM_UNIXTIME(CAST({} AS DECIMAL(20,6)))", s
}

func leftPad(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// MySQL's TIMESTAMP spans 1970-01-01 00:00:01 to 2038-01-19 03:14:07 UTC;
// FROM_UNIXTIME is NULL outside it.
var (
	mysqlFirst = time.Unix(1, 0)
	mysqlLast  = time.Unix(1<<31-1, 0)
)

// createdRange: bounds outside the column's range select all or nothing.
func (mysql) createdRange(since, until time.Time) (time.Time, time.Time, bool) {
	if !since.IsZero() && since.After(mysqlLast) || !until.IsZero() && !until.After(mysqlFirst) {
		return since, until, true
	}
	if since.Before(mysqlFirst) {
		since = time.Time{}
	}
	if until.After(mysqlLast) {
		until = time.Time{}
	}
	return since, until, false
}

func (mysql) messageIDsIn(ids []string) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return "message_id IN (" + placeholders(len(ids)) + ")", args
}

func (mysql) messageIDTextIn(ids []string) (string, []any) {
	return "message_id IN (SELECT v FROM JSON_TABLE({}, '$[*]' COLUMNS (v VARCHAR(64) PATH '$')) AS jt)", []any{jsonList(ids)}
}

func (mysql) idsIn(ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return "id IN (" + placeholders(len(ids)) + ")", args
}

func (mysql) searchStatus(status string, _, _ bool) (string, string) {
	return "", "status = " + status
}

// insertOneArgs: the statement reads the not-before time before the delay.
func (mysql) insertOneArgs(m *NewMessage) []any {
	args := oneArgs(m)
	args[6], args[7] = args[7], args[6]
	return args
}

// archive locks the due rows first, in one transaction with the copy and
// the delete: those then see the same rows, whatever the clock says by
// then.
func (mysql) archive(ctx context.Context, st *Store, s retentionStatements, ids []int64, sent, dead int64) (int64, error) {
	return archiveInTx(ctx, st, s, s.lock, s.archive, ids, sent, dead)
}

// lockMigrations takes a named lock, waiting up to a minute.
func (mysql) lockMigrations(ctx context.Context, s Session) (func(), error) {
	rows, err := s.Query(ctx, "SELECT GET_LOCK('outbox_migrate', 60)")
	if err != nil {
		return nil, err
	}
	var got *int
	if rows.Next() {
		_ = rows.Scan(&got)
	}
	rows.Close()
	if got == nil || *got != 1 {
		return nil, errors.New("another migration holds the lock")
	}
	return func() {
		if r, err := s.Query(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK('outbox_migrate')"); err == nil {
			r.Close()
		}
	}, nil
}

// pool runs the store's own statements with a time limit on the server.
func (mysql) pool(db Querier) Querier { return mysqlCapped{db} }

// mysqlCapped runs each statement with a server-side limit on its running
// time, a little under what its context leaves. When a context ends
// mid-statement, go-sql-driver/mysql closes the connection, but the server
// notices only once it has a result to send: it runs the statement to its
// end — a read over a big backlog for minutes, burning a core, a write
// waiting for a row lock for innodb_lock_wait_timeout, then writing —
// while the relay has moved on. With the limit, the server stops it when
// the relay gives up, or just before, so the error (1969 on MariaDB, 3024
// on MySQL) comes back on a connection the pool keeps.
//
// MariaDB takes the limit as a SET STATEMENT max_statement_time prefix,
// inside a MariaDB-only executable comment (/*M! … */) that MySQL skips;
// it applies to every statement. MySQL takes it as a MAX_EXECUTION_TIME
// optimizer hint, which it honours for SELECT only (a MariaDB that does
// not know the hint skips it as a comment). Being part of the statement
// text, the limit holds with interpolated and with server-prepared
// arguments, and leaves the connection's session as it was: the pool is
// the application's too. Statements without a deadline, and any but
// SELECT, INSERT, UPDATE, DELETE and REPLACE, are sent as they are. A
// caller's transaction (Insert, InboxClaim) never passes through here.
type mysqlCapped struct{ q Querier }

func (c mysqlCapped) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	return c.q.Exec(ctx, mysqlCap(ctx, sql), args...)
}

func (c mysqlCapped) Query(ctx context.Context, sql string, args ...any) (Rows, error) {
	return c.q.Query(ctx, mysqlCap(ctx, sql), args...)
}

// mysqlCap is sql with the time limit of ctx's deadline, less a tenth
// (at most 100 ms: the time for the error to come back first).
func mysqlCap(ctx context.Context, sql string) string {
	deadline, ok := ctx.Deadline()
	if !ok {
		return sql
	}
	left := time.Until(deadline)
	ms := max((left - min(left/10, 100*time.Millisecond)).Milliseconds(), 1)
	body := strings.TrimLeft(sql, " \t\r\n")
	verb := body[:len(body)-len(strings.TrimLeft(body, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))]
	prefix := "/*M! SET STATEMENT max_statement_time=" + strconv.FormatInt(ms/1000, 10) + "." + leftPad(strconv.FormatInt(ms%1000, 10), 3) + " FOR */ "
	switch strings.ToUpper(verb) {
	case "SELECT":
		return prefix + verb + " /*+ MAX_EXECUTION_TIME(" + strconv.FormatInt(ms, 10) + ") */" + body[len(verb):]
	case "INSERT", "UPDATE", "DELETE", "REPLACE":
		return prefix + body
	}
	return sql
}
