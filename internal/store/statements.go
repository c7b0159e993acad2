package store

// statements holds every statement of one dialect. The texts are fixed at
// start-up; nothing from users is ever spliced into them.
type statements struct {
	// insert takes the dialect's batch argument form (see insertChunk).
	insert string
	// insertOne is insert for a single message, with one argument per
	// column: cheaper to encode and to run than the batch form, and the
	// common case (one message per business transaction).
	insertOne string
	// insertFresh is insertOne for a message whose id was just generated:
	// on PostgreSQL, without ON CONFLICT (an arbiter-index probe and a
	// speculative insertion per row that such an id never needs).
	insertFresh string
	// read: owner-independent ready rows of the given partitions, oldest
	// first, skipping keys held back by an earlier waiting message.
	read string
	// readInline is read as one statement; on PostgreSQL read calls the
	// function outbox_read, whose body is this statement (tests hold the
	// two together and EXPLAIN this one with the function's settings).
	readInline string
	// settle applies outcomes, fenced by the caller's leases.
	settle string
	// settleInline is settle as one statement; on PostgreSQL settle calls
	// the function outbox_settle, whose body is this statement.
	settleInline string

	registerRelay string
	liveRelays    string
	dropRelay     string
	pruneRelays   string
	partitions    string
	acquire       string
	held          string
	renew         string
	release       string
	releaseAll    string
	markInflight  string

	inboxClaim string
	inboxPurge string

	countByStatusTopic string
	oldestPending      string
	now                string
}

// epoch renders a timestamp column as float seconds since the Unix epoch.
func (d Dialect) epoch(col string) string {
	switch d {
	case Postgres:
		return "extract(epoch from " + col + ")::float8"
	case MySQL:
		return "UNIX_TIMESTAMP(" + col + ")"
	default:
		return "((julianday(" + col + ") - 2440587.5) * 86400.0)"
	}
}

// nowSQL is the database's current time in the column representation.
func (d Dialect) nowSQL() string {
	switch d {
	case Postgres:
		return "now()"
	case MySQL:
		return "NOW(6)"
	default:
		return "strftime('%Y-%m-%d %H:%M:%f', 'now')"
	}
}

// plusMicros is now() plus the microseconds in expr.
func (d Dialect) plusMicros(expr string) string { return d.shiftMicros("+", expr) }

// minusMicros is now() minus the microseconds in expr.
func (d Dialect) minusMicros(expr string) string { return d.shiftMicros("-", expr) }

func (d Dialect) shiftMicros(sign, expr string) string {
	switch d {
	case Postgres:
		return "now() " + sign + " (" + expr + ")::bigint * interval '1 microsecond'"
	case MySQL:
		return "NOW(6) " + sign + " INTERVAL (" + expr + ") MICROSECOND"
	default:
		return "strftime('%Y-%m-%d %H:%M:%f', 'now', '" + sign + "' || ((" + expr + ") / 1000000.0) || ' seconds')"
	}
}

// ph returns the n-th (1-based) placeholder.
func (d Dialect) ph(n int) string {
	if d == Postgres {
		return "$" + itoa(n)
	}
	return "?"
}

// intList is a predicate "col is one of the ints in placeholder n".
func (d Dialect) inInts(col string, n int) string {
	switch d {
	case Postgres:
		return col + " = ANY(" + d.ph(n) + "::int[])"
	case MySQL:
		return col + " IN (SELECT v FROM JSON_TABLE(?, '$[*]' COLUMNS (v BIGINT PATH '$')) AS jt)"
	default:
		return col + " IN (SELECT value FROM json_each(?))"
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// sqliteUUID makes a random (version 4) UUID in SQLite, for rows whose
// message id the caller left out.
const sqliteUUID = "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))"

func build(d Dialect) statements {
	var s statements
	now := d.nowSQL()
	cols := "m.id, m.message_id, m.topic, m.business_key, m.payload, m.headers, m.attempts, m.max_attempts, m.partition_no, m.unknown_outcome, " + d.epoch("m.created_at")
	waitingCond := "b.status = 'pending' AND b.available_at > b.created_at AND b.business_key IS NOT NULL"
	switch d {
	case Postgres:
		cols = "m.id, m.message_id::text, m.topic, m.business_key, m.payload, m.headers::text, m.attempts, m.max_attempts, m.partition_no, m.unknown_outcome, " + d.epoch("m.created_at")
		s.insert = `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
SELECT u.message_id, u.topic, u.business_key, u.payload, u.headers::jsonb, coalesce(u.max_attempts, 10),
       coalesce(u.not_before, now() + u.delay_us * interval '1 microsecond')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::bigint[], $8::timestamptz[])
     AS u(message_id, topic, business_key, payload, headers, max_attempts, delay_us, not_before)
ON CONFLICT (message_id) DO NOTHING
RETURNING message_id::text`
		s.insertFresh = `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
VALUES ($1::uuid, $2, $3, $4, $5::jsonb, coalesce($6::int, 10), coalesce($8::timestamptz, now() + $7::bigint * interval '1 microsecond'))`
		// A duplicate id the caller chose must not abort the caller's
		// transaction: it is skipped, and reported.
		s.insertOne = s.insertFresh + `
ON CONFLICT (message_id) DO NOTHING`
		// The lease check is a per-row subquery: as a join, the planner may
		// start from the lease table and probe every outcome per partition.
		// The relay runs this statement as the body of outbox_settle
		// (005_cached_plans.sql), planned once per connection.
		s.settle = `SELECT outbox_settle($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::bool[], $7)`
		s.settleInline = `UPDATE outbox_messages AS m SET
    attempts = m.attempts + u.inc,
    available_at = CASE WHEN u.status = 'pending' THEN now() + u.delay_us * interval '1 microsecond' ELSE m.available_at END,
    sent_at = CASE WHEN u.status = 'sent' THEN now() ELSE m.sent_at END,
    last_error = CASE WHEN u.status = 'sent' THEN m.last_error ELSE u.err END,
    unknown_outcome = u.unknown,
    status = u.status
FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::bool[]) AS u(id, status, delay_us, err, inc, unknown)
WHERE m.id = u.id AND m.status = 'pending'
  AND (SELECT l.owner = $7 AND l.expires_at > now() FROM outbox_leases AS l WHERE l.partition_no = m.partition_no)`
		s.registerRelay = `INSERT INTO outbox_relays (relay_id, seen_at) VALUES ($1, now())
ON CONFLICT (relay_id) DO UPDATE SET seen_at = now()`
	case MySQL:
		s.insert = `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
SELECT u.message_id, u.topic, u.business_key, u.payload, u.headers, COALESCE(u.max_attempts, 10),
       COALESCE(FROM_UNIXTIME(u.not_before_us / 1000000), NOW(6) + INTERVAL u.delay_us MICROSECOND)
FROM JSON_TABLE(?, '$[*]' COLUMNS (
    message_id VARCHAR(36) PATH '$[0]', topic VARCHAR(255) PATH '$[1]', business_key VARCHAR(255) PATH '$[2]',
    payload LONGTEXT PATH '$[3]', headers TEXT PATH '$[4]', max_attempts INT PATH '$[5]',
    delay_us BIGINT PATH '$[6]', not_before_us BIGINT PATH '$[7]')) AS u`
		s.insertOne = `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
VALUES (?, ?, ?, ?, ?, COALESCE(?, 10), COALESCE(FROM_UNIXTIME(? / 1000000), NOW(6) + INTERVAL ? MICROSECOND))`
		s.settle = `UPDATE outbox_messages AS m
JOIN JSON_TABLE(?, '$[*]' COLUMNS (
    id BIGINT PATH '$[0]', status VARCHAR(16) PATH '$[1]', delay_us BIGINT PATH '$[2]',
    err TEXT PATH '$[3]', inc INT PATH '$[4]', unknown INT PATH '$[5]')) AS u ON m.id = u.id
JOIN outbox_leases AS l ON l.partition_no = m.partition_no
SET m.attempts = m.attempts + u.inc,
    m.available_at = CASE WHEN u.status = 'pending' THEN NOW(6) + INTERVAL u.delay_us MICROSECOND ELSE m.available_at END,
    m.sent_at = CASE WHEN u.status = 'sent' THEN NOW(6) ELSE m.sent_at END,
    m.last_error = CASE WHEN u.status = 'sent' THEN m.last_error ELSE u.err END,
    m.unknown_outcome = u.unknown,
    m.status = u.status
WHERE m.status = 'pending' AND l.owner = ? AND l.expires_at > NOW(6)`
		s.registerRelay = `INSERT INTO outbox_relays (relay_id, seen_at) VALUES (?, NOW(6))
ON DUPLICATE KEY UPDATE seen_at = NOW(6)`
	default:
		s.insert = `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
SELECT coalesce(json_extract(value, '$[0]'), ` + sqliteUUID + `),
       json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'),
       coalesce(json_extract(value, '$[5]'), 10),
       coalesce(strftime('%Y-%m-%d %H:%M:%f', json_extract(value, '$[7]') / 1000000.0, 'unixepoch'),
                strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (json_extract(value, '$[6]') / 1000000.0) || ' seconds'))
FROM json_each(?) ORDER BY key`
		s.insertOne = `INSERT INTO outbox_messages (message_id, topic, business_key, payload, headers, max_attempts, available_at)
VALUES (coalesce(?1, ` + sqliteUUID + `), ?2, ?3, ?4, ?5, coalesce(?6, 10),
        coalesce(strftime('%Y-%m-%d %H:%M:%f', ?8 / 1000000.0, 'unixepoch'), strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (?7 / 1000000.0) || ' seconds')))`
		// The outcomes are materialised first and the status test is kept off
		// the index ('+'), so the update walks the outcomes and looks each
		// row up by id instead of scanning pending rows.
		s.settle = `WITH u AS MATERIALIZED (
    SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS status, json_extract(value, '$[2]') AS delay_us,
           json_extract(value, '$[3]') AS err, json_extract(value, '$[4]') AS inc, json_extract(value, '$[5]') AS unknown
    FROM json_each(?))
UPDATE outbox_messages SET
    attempts = attempts + u.inc,
    available_at = CASE WHEN u.status = 'pending' THEN strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (u.delay_us / 1000000.0) || ' seconds') ELSE available_at END,
    sent_at = CASE WHEN u.status = 'sent' THEN strftime('%Y-%m-%d %H:%M:%f', 'now') ELSE sent_at END,
    last_error = CASE WHEN u.status = 'sent' THEN last_error ELSE u.err END,
    unknown_outcome = u.unknown,
    status = u.status
FROM u
WHERE outbox_messages.id = u.id AND +outbox_messages.status = 'pending'
  AND EXISTS (SELECT 1 FROM outbox_leases AS l WHERE l.partition_no = outbox_messages.partition_no
              AND l.owner = ? AND l.expires_at > strftime('%Y-%m-%d %H:%M:%f', 'now'))`
		s.registerRelay = `INSERT INTO outbox_relays (relay_id, seen_at) VALUES (?, strftime('%Y-%m-%d %H:%M:%f', 'now'))
ON CONFLICT (relay_id) DO UPDATE SET seen_at = excluded.seen_at`
	}

	// Index hints keep the plans shaped for a big backlog on databases
	// whose planners have no statistics to go by: walk pending rows in id
	// order, and probe a key's waiting rows by key.
	pendingHint, waitingHint := "", ""
	switch d {
	case MySQL:
		pendingHint = " FORCE INDEX (outbox_messages_pending_idx)"
		waitingHint = " FORCE INDEX (outbox_messages_waiting_idx)"
	case SQLite:
		pendingHint = " INDEXED BY outbox_messages_pending_idx"
		waitingHint = " INDEXED BY outbox_messages_waiting_idx"
	}
	// SQLite re-reads its clock between the rows a SELECT returns, so a row
	// passed over as "not yet due" could be due by the time a later row of
	// its key is checked, letting that row overtake it: read the clock once.
	readNow, with := now, ""
	if d == SQLite {
		with = "WITH clock AS MATERIALIZED (SELECT " + now + " AS now)\n"
		readNow = "(SELECT now FROM clock)"
	}
	s.read = with + `SELECT ` + cols + `
FROM outbox_messages AS m` + pendingHint + `
WHERE m.status = 'pending' AND m.available_at <= ` + readNow + ` AND ` + d.inInts("m.partition_no", 1) + `
  AND (m.business_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM outbox_messages AS b` + waitingHint + `
      WHERE b.business_key = m.business_key AND ` + waitingCond + `
        AND b.id < m.id AND b.available_at > ` + readNow + `))
ORDER BY m.id
LIMIT ` + d.ph(2)
	s.readInline = s.read
	if s.insertFresh == "" {
		s.insertFresh = s.insertOne
	}
	if s.settleInline == "" {
		s.settleInline = s.settle
	}
	if d == Postgres {
		// The same read, in the function of migrations 4 and 5 that pins its
		// plan to the indexes and keeps it (see 005_cached_plans.sql).
		s.read = `SELECT * FROM outbox_read(` + d.ph(1) + `::int[], ` + d.ph(2) + `)`
	}

	s.liveRelays = `SELECT relay_id FROM outbox_relays WHERE seen_at > ` + d.minusMicros(d.ph(1)) + ` ORDER BY relay_id`
	s.dropRelay = `DELETE FROM outbox_relays WHERE relay_id = ` + d.ph(1)
	s.pruneRelays = `DELETE FROM outbox_relays WHERE seen_at < ` + d.minusMicros(d.ph(1))
	s.partitions = `SELECT count(*) FROM outbox_leases`
	// Assignment order matters on MySQL, which evaluates SET left to right
	// with the new values: read the old owner before overwriting it.
	s.acquire = `UPDATE outbox_leases SET
    prev_owner = owner,
    inflight_max_id = CASE WHEN owner IS NULL THEN 0 ELSE inflight_max_id END,
    owner = ` + d.ph(1) + `,
    expires_at = ` + d.plusMicros(d.ph(2)) + `
WHERE ` + d.inInts("partition_no", 3) + ` AND (owner IS NULL OR owner = ` + d.ph(4) + ` OR expires_at <= ` + now + `)`
	s.held = `SELECT partition_no, inflight_max_id, coalesce(prev_owner, '') FROM outbox_leases WHERE owner = ` + d.ph(1) + ` AND expires_at > ` + now + ` ORDER BY partition_no`
	s.renew = `UPDATE outbox_leases SET expires_at = ` + d.plusMicros(d.ph(1)) + `
WHERE owner = ` + d.ph(2) + ` AND expires_at > ` + now
	s.release = `UPDATE outbox_leases SET owner = NULL, prev_owner = NULL, inflight_max_id = 0, expires_at = ` + now + `
WHERE owner = ` + d.ph(1) + ` AND ` + d.inInts("partition_no", 2)
	s.releaseAll = `UPDATE outbox_leases SET owner = NULL, prev_owner = NULL, inflight_max_id = 0, expires_at = ` + now + `
WHERE owner = ` + d.ph(1)
	// Marks that do not change are not written: most partitions of a
	// round hold nothing in flight, round after round.
	switch d {
	case Postgres:
		// Like the settle, a mark commits without waiting for the WAL
		// flush (set_config, local to its transaction): a mark lost to a
		// database crash only means its messages are published again
		// without being suspected or checked first.
		s.markInflight = `UPDATE outbox_leases AS l SET inflight_max_id = u.max_id
FROM unnest($1::int[], $2::bigint[]) AS u(p, max_id)
WHERE l.partition_no = u.p AND l.owner = $3 AND l.inflight_max_id <> u.max_id
  AND set_config('synchronous_commit', 'off', true) IS NOT NULL`
	case MySQL:
		s.markInflight = `UPDATE outbox_leases AS l
JOIN JSON_TABLE(?, '$[*]' COLUMNS (p INT PATH '$[0]', max_id BIGINT PATH '$[1]')) AS u ON l.partition_no = u.p
SET l.inflight_max_id = u.max_id
WHERE l.owner = ? AND l.inflight_max_id <> u.max_id`
	default:
		s.markInflight = `UPDATE outbox_leases SET inflight_max_id = u.max_id
FROM (SELECT json_extract(value, '$[0]') AS p, json_extract(value, '$[1]') AS max_id FROM json_each(?)) AS u
WHERE outbox_leases.partition_no = u.p AND outbox_leases.owner = ? AND outbox_leases.inflight_max_id <> u.max_id`
	}

	// Insert-first dedupe: a concurrent second claim of the same id waits
	// on the primary key until the first transaction ends, then finds the
	// row (0 rows affected) or, after a rollback, takes it.
	switch d {
	case MySQL:
		s.inboxClaim = `INSERT INTO outbox_inbox (consumer, message_id) VALUES (?, ?) ON DUPLICATE KEY UPDATE consumer = consumer`
	default:
		s.inboxClaim = `INSERT INTO outbox_inbox (consumer, message_id) VALUES (` + d.ph(1) + `, ` + d.ph(2) + `) ON CONFLICT (consumer, message_id) DO NOTHING`
	}
	s.inboxPurge = `DELETE FROM outbox_inbox WHERE consumer = ` + d.ph(1) + ` AND processed_at < ` + d.minusMicros(d.ph(2))

	s.countByStatusTopic = `SELECT status, topic, count(*) FROM outbox_messages GROUP BY status, topic ORDER BY status, topic`
	switch d {
	case Postgres:
		s.oldestPending = `SELECT extract(epoch from now() - created_at)::float8 FROM outbox_messages WHERE status = 'pending' ORDER BY id LIMIT 1`
	case MySQL:
		s.oldestPending = `SELECT TIMESTAMPDIFF(MICROSECOND, created_at, NOW(6)) / 1000000.0 FROM outbox_messages WHERE status = 'pending' ORDER BY id LIMIT 1`
	default:
		s.oldestPending = `SELECT (julianday('now') - julianday(created_at)) * 86400.0 FROM outbox_messages WHERE status = 'pending' ORDER BY id LIMIT 1`
	}
	s.now = `SELECT ` + d.epoch(now)
	return s
}
