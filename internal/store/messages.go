package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/txoutbox/outbox/driver"
)

// Store runs the outbox statements of one dialect over a database handle.
type Store struct {
	d  Dialect
	dl dialect
	// db is what the store's own statements run on: raw through the
	// dialect's pool (on MySQL it adds server-side time limits). raw is
	// the handle as New was given it.
	db  Querier
	raw Querier
	s   statements
	// ret are the retention statements over outbox_messages.
	ret retentionStatements
	// session opens a dedicated connection, for the statements that need
	// a transaction of their own (nil: they fail).
	session func(ctx context.Context) (Session, error)
	// maxPayload is the payload limit of the relay's reads (see
	// WithPayloadLimit); 0: none.
	maxPayload int64
}

// New returns a Store for dialect d over db, which must be a pool (the
// relay's statements run outside any caller transaction).
func New(d Dialect, db Querier) *Store {
	dl := dialectOf(d)
	return &Store{d: d, dl: dl, db: dl.pool(db), raw: db, s: dl.statements(), ret: dl.retention()}
}

// Dialect is the store's dialect.
func (st *Store) Dialect() Dialect { return st.d }

// DB is the handle the store was built over, as it was given.
func (st *Store) DB() Querier { return st.raw }

// WithPayloadLimit returns a store like st whose relay reads (Read,
// ReadMark, SettleReadMark) load no payload that could not decode to n
// bytes or fewer: one longer than the base64 form of n bytes
// (4·⌈n/3⌉, as a binary body is stored base64) comes back with Oversize
// set, PayloadBytes its stored length and Payload empty, so that a row
// of any size costs the relay no memory. A payload within that bound is
// read whole; checking its size against n, decoded where it is base64,
// is the caller's. n <= 0: no limit. Every read sets PayloadBytes.
func (st *Store) WithPayloadLimit(n int) *Store {
	c := *st
	c.maxPayload = int64(max(n, 0))
	return &c
}

// readBound is the longest payload, in bytes, that a relay read loads.
func (st *Store) readBound() int64 {
	if st.maxPayload <= 0 || st.maxPayload > math.MaxInt64/4-3 {
		return math.MaxInt64
	}
	return 4 * ((st.maxPayload + 2) / 3)
}

// maxInsertChunkBytes bounds the argument of one insert statement (MySQL's
// max_allowed_packet defaults to 16 MiB).
const maxInsertChunkBytes = 4 << 20

// DuplicateError reports message ids that already exist.
type DuplicateError struct{ MessageIDs []string }

func (e *DuplicateError) Error() string {
	return "message_id already exists: " + strings.Join(e.MessageIDs, ", ")
}

// Insert writes msgs through q (the caller's transaction), in order. A
// deadlock is the caller's to retry, with its whole transaction.
func (st *Store) Insert(ctx context.Context, q Querier, msgs []NewMessage) error {
	for start := 0; start < len(msgs); {
		end, size := start, 0
		for end < len(msgs) && (end == start || size+len(msgs[end].Payload) < maxInsertChunkBytes) && end-start < 5000 {
			size += len(msgs[end].Payload) + len(msgs[end].Headers) + 128
			end++
		}
		if err := st.insertChunk(ctx, q, msgs[start:end]); err != nil {
			return err
		}
		start = end
	}
	return st.setExpiry(ctx, q, msgs)
}

// setExpiry writes the expires_at of the messages that have one, in the
// same transaction as their insert: the insert statements stay those of
// messages without one, which pay nothing.
func (st *Store) setExpiry(ctx context.Context, q Querier, msgs []NewMessage) error {
	for i := range msgs {
		m := &msgs[i]
		if m.ExpiresAt.IsZero() && m.ExpiresIn <= 0 {
			continue
		}
		if m.MessageID == "" {
			return errors.New("a message with an expiry needs its message id")
		}
		stmt, arg := expirySQL, any(m.ExpiresAt)
		switch {
		case m.ExpiresAt.IsZero() && st.d == Postgres:
			stmt, arg = expiryInSQL, m.ExpiresIn.Microseconds()
		case m.ExpiresAt.IsZero() && st.d == MySQL:
			stmt, arg = "UPDATE outbox_messages SET expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE message_id = ?", m.ExpiresIn.Microseconds()
		case m.ExpiresAt.IsZero():
			stmt, arg = "UPDATE outbox_messages SET expires_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || ' seconds') WHERE message_id = ?", m.ExpiresIn.Microseconds()
		case st.d == MySQL:
			stmt, arg = "UPDATE outbox_messages SET expires_at = FROM_UNIXTIME(? / 1000000) WHERE message_id = ?", m.ExpiresAt.UnixMicro()
		case st.d == SQLite:
			stmt, arg = "UPDATE outbox_messages SET expires_at = strftime('%Y-%m-%d %H:%M:%f', ? / 1000000.0, 'unixepoch') WHERE message_id = ?", m.ExpiresAt.UnixMicro()
		}
		if _, err := q.Exec(ctx, stmt, arg, m.MessageID); err != nil {
			return fmt.Errorf("setting expires_at: %w", err)
		}
	}
	return nil
}

// expirySQL sets a new message's expires_at on PostgreSQL, and
// expiryInSQL sets it to a number of microseconds after now().
const (
	expirySQL   = "UPDATE outbox_messages SET expires_at = $1::timestamptz WHERE message_id = $2::uuid"
	expiryInSQL = "UPDATE outbox_messages SET expires_at = now() + ($1)::bigint * interval '1 microsecond' WHERE message_id = $2::uuid"
)

// Expire moves the pending messages of the partitions owner leases whose
// expires_at has come to expired, with the reason in last_error, and
// returns how many it moved (schema version 19).
func (st *Store) Expire(ctx context.Context, owner string) (int64, error) {
	return st.execRetry(ctx, st.s.expire, owner)
}

// ExpireOld moves the pending messages ids of the partitions owner leases
// to expired, with reason in last_error and available_at set to now (the
// time of death, as the expiry loop does): how the relay expires a
// message older than its route's max age. It returns how many it moved.
func (st *Store) ExpireOld(ctx context.Context, owner string, ids []int64, reason string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	switch st.d {
	case Postgres:
		return st.execRetry(ctx, `UPDATE outbox_messages AS m SET status = 'expired', available_at = now(), last_error = $2
WHERE m.id = ANY($1::bigint[]) AND m.status = 'pending'
  AND (SELECT l.owner = $3 AND l.expires_at > now() FROM outbox_leases AS l WHERE l.partition_no = m.partition_no)`, ids, reason, owner)
	case MySQL:
		args := []any{reason}
		for _, id := range ids {
			args = append(args, id)
		}
		return st.execRetry(ctx, `UPDATE outbox_messages AS m JOIN outbox_leases AS l ON l.partition_no = m.partition_no
SET m.status = 'expired', m.available_at = NOW(6), m.last_error = ?
WHERE m.id IN (`+placeholdersQ(len(ids))+`) AND m.status = 'pending' AND l.owner = ? AND l.expires_at > NOW(6)`, append(args, owner)...)
	default:
		args := []any{reason}
		for _, id := range ids {
			args = append(args, id)
		}
		return st.execRetry(ctx, `UPDATE outbox_messages SET status = 'expired', available_at = `+sqliteNow+`, last_error = ?
WHERE id IN (`+placeholdersQ(len(ids))+`) AND status = 'pending'
  AND EXISTS (SELECT 1 FROM outbox_leases AS l WHERE l.partition_no = 0 AND l.owner = ? AND l.expires_at > `+sqliteNow+`)`, append(args, owner)...)
	}
}

func (st *Store) insertChunk(ctx context.Context, q Querier, msgs []NewMessage) error {
	if len(msgs) == 1 {
		return st.insertOne(ctx, q, &msgs[0])
	}
	return st.dl.insertBatch(ctx, q, st.s.insert, msgs)
}

// insertOne writes one message with insertOne.
func (st *Store) insertOne(ctx context.Context, q Querier, m *NewMessage) error {
	stmt := st.s.insertOne
	if m.FreshID {
		stmt = st.s.insertFresh
	}
	n, err := q.Exec(ctx, stmt, st.dl.insertOneArgs(m)...)
	if (err == nil && n == 0) || (err != nil && isUniqueViolation(err)) {
		return &DuplicateError{MessageIDs: []string{m.MessageID}}
	}
	return err
}

// retryAttempts is how many times retry runs a write that keeps being
// chosen as a deadlock victim.
const retryAttempts = 5

// retry runs fn, a write on the store's pool that the database may choose
// as a deadlock victim (MySQL locks index ranges; relays settle, acquire
// and release concurrently), again while it fails as one, up to
// retryAttempts times with a short growing pause. It is the store's one
// retry layer: every such write goes through it once, and nothing retries
// inside it. A write through a caller's transaction (Insert, InboxClaim)
// never does: the deadlock rolled back the caller's whole transaction,
// which only the caller can run again. When the attempts run out, the
// error is marked for Retried.
func (st *Store) retry(ctx context.Context, fn func() (int64, error)) (int64, error) {
	for attempt := 1; ; attempt++ {
		n, err := fn()
		if err == nil || !isDeadlock(err) {
			return n, err
		}
		if attempt == retryAttempts {
			return n, &retriedError{err: err}
		}
		select {
		case <-ctx.Done():
			return n, err
		case <-time.After(time.Duration(5<<(attempt-1)) * time.Millisecond):
		}
	}
}

// execRetry runs one statement on the store's pool through retry.
func (st *Store) execRetry(ctx context.Context, sql string, args ...any) (int64, error) {
	return st.retry(ctx, func() (int64, error) { return st.db.Exec(ctx, sql, args...) })
}

// retriedError is a deadlock retry gave up on.
type retriedError struct{ err error }

func (e *retriedError) Error() string { return e.err.Error() }

func (e *retriedError) Unwrap() error { return e.err }

// Retried reports whether err is a deadlock the store has already retried
// as often as it does: a caller's own retry loop (one for lost
// connections, say) should not run the call again for it.
func Retried(err error) bool {
	var r *retriedError
	return errors.As(err, &r)
}

// isDeadlock reports an error the driver marked as a deadlock or
// serialization failure.
func isDeadlock(err error) bool { return errors.Is(err, driver.ErrDeadlock) }

// isUniqueViolation reports an error the driver marked as a unique-key
// violation.
func isUniqueViolation(err error) bool { return errors.Is(err, driver.ErrUniqueViolation) }

// Read returns up to limit ready messages of the given partitions (see
// WithPayloadLimit for the payloads it leaves out).
func (st *Store) Read(ctx context.Context, parts []int, limit int) ([]Row, error) {
	return st.read(ctx, st.s.read, st.dl.intList(parts), limit)
}

// readMarkUpTo is the largest limit ReadMark reads and marks in one
// statement. The statement keeps the rows it read to work the marks out
// and copies each again to hand it out: next to a read alone that is
// about a microsecond a row (0.9 ms for 1,000 rows of 500 bytes, a third
// of the read), where a statement of its own for the marks costs a round
// trip and about 0.2 ms. One statement pays for a round of a few
// messages, not for a backlog's full batches.
const readMarkUpTo = 256

// ReadMark is Read that records, before the rows are handed out, the
// in-flight marks of what it read on owner's leases. Where the dialect can
// it is one statement (PostgreSQL, for a limit up to readMarkUpTo), which
// raises the mark of each partition it read a higher id from and lowers
// none; a larger read on PostgreSQL marks the partitions it read from with
// MarkInflight after the read. Elsewhere Read and MarkInflight run in
// turn (each partition of parts marked with the highest id read from it,
// 0 for none). An empty read marks nothing. Either way a mark covers every
// row of the batch; a mark left higher covers only rows published before.
func (st *Store) ReadMark(ctx context.Context, owner string, parts []int, limit int) ([]Row, error) {
	if st.s.readMark != "" && limit <= readMarkUpTo {
		// The marks are lease rows that renewals and takeovers write
		// too: a deadlock rolls the read back, and it is run again.
		var rows []Row
		_, err := st.retry(ctx, func() (int64, error) {
			var err error
			rows, err = st.read(ctx, st.s.readMark, st.dl.intList(parts), limit, owner)
			return int64(len(rows)), err
		})
		return rows, err
	}
	rows, err := st.Read(ctx, parts, limit)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	ids := MaxIDs(parts, rows)
	marked, maxIDs := parts, ids
	if st.s.readMark != "" {
		// As the one statement: partitions that gave nothing keep
		// their marks.
		marked, maxIDs = nil, nil
		for i, id := range ids {
			if id > 0 {
				marked, maxIDs = append(marked, parts[i]), append(maxIDs, id)
			}
		}
	}
	if err := st.MarkInflight(ctx, owner, marked, maxIDs); err != nil {
		return nil, err
	}
	return rows, nil
}

// SettlesWithRead reports whether the store has SettleReadMark's one
// statement (PostgreSQL).
func (st *Store) SettlesWithRead() bool { return st.s.settleReadMark != "" }

// SettleReadMark is Settle, then ReadMark, in one statement where the
// dialect has it (SettlesWithRead): the read sees what the settle wrote.
// It returns ErrNoSettleRead elsewhere. A deadlock rolls both back, and the
// pair is run again.
func (st *Store) SettleReadMark(ctx context.Context, owner string, outs []Outcome, parts []int, limit int) (rows []Row, settled int64, err error) {
	pg, ok := st.dl.(postgres)
	if !ok || !st.SettlesWithRead() {
		return nil, 0, ErrNoSettleRead
	}
	args := append(pg.settleArgs(outs), owner, st.dl.intList(parts), limit, st.readBound())
	_, err = st.retry(ctx, func() (int64, error) {
		var err error
		rows, err = appendRows(ctx, st.db, make([]Row, 0, limit+1), func(scan func(...any) error) (Row, error) {
			r, n, err := scanRow(scan, new(*int64))
			if n != nil {
				settled = *n
				r.ID = 0
			}
			return r, err
		}, st.s.settleReadMark, args...)
		rows = slices.DeleteFunc(rows, func(r Row) bool { return r.ID == 0 })
		return int64(len(rows)), err
	})
	return rows, settled, err
}

// ErrNoSettleRead: the store settles and reads in statements of their own.
var ErrNoSettleRead = errors.New("store: no combined settle and read for this database")

// MaxIDs is, for each partition of parts, the highest id among rows from
// it (0 for none): the in-flight marks of a batch.
func MaxIDs(parts []int, rows []Row) []int64 {
	maxIDs := make([]int64, len(parts))
	for _, row := range rows {
		if i := slices.Index(parts, row.Partition); i >= 0 {
			maxIDs[i] = max(maxIDs[i], row.ID)
		}
	}
	return maxIDs
}

// read runs a read statement whose arguments are the payload bound in
// bytes (readBound), the partitions and the limit, then more.
func (st *Store) read(ctx context.Context, stmt string, parts any, limit int, more ...any) ([]Row, error) {
	return appendRows(ctx, st.db, make([]Row, 0, limit), func(scan func(...any) error) (Row, error) {
		r, _, err := scanRow[any](scan)
		return r, err
	}, stmt, append([]any{st.readBound(), parts, limit}, more...)...)
}

// scanRow scans a read's row, then the columns of extra (each a pointer),
// and returns the first of them. A read returns the payload NULL when it
// left it out (over the bound) and its length in bytes last; a creation
// time that is not one (NULL, or infinite) is the zero time: unknown.
func scanRow[T any](scan func(...any) error, extra ...*T) (Row, T, error) {
	var r Row
	var key, payload *string
	var created *float64
	var unknown any
	var first T
	dst := []any{&r.ID, &r.MessageID, &r.Topic, &key, &payload, &r.Headers, &r.Attempts, &r.MaxAttempts, &r.Partition, &unknown, &created, &r.PayloadBytes}
	for _, e := range extra {
		dst = append(dst, e)
	}
	if err := scan(dst...); err != nil {
		return r, first, err
	}
	if key != nil {
		r.Key, r.HasKey = *key, true
	}
	if payload != nil {
		r.Payload = *payload
	} else {
		r.Oversize = true
	}
	r.UnknownOutcome = truthy(unknown)
	if created != nil && !math.IsInf(*created, 0) && !math.IsNaN(*created) {
		r.CreatedAt = fromEpoch(*created)
	}
	if len(extra) > 0 {
		first = *extra[0]
	}
	return r, first, nil
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case int64:
		return x != 0
	case []byte:
		return len(x) > 0 && x[0] != '0'
	}
	return false
}

func fromEpoch(f float64) time.Time {
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

// Settle applies outcomes for rows in partitions owner still holds; it
// returns how many rows changed. Rows of partitions the owner lost are left
// alone: their new owner will deliver them. A statement chosen as a
// deadlock victim (MySQL locks index ranges) is run again.
func (st *Store) Settle(ctx context.Context, owner string, outs []Outcome) (int64, error) {
	if len(outs) == 0 {
		return 0, nil
	}
	return st.retry(ctx, func() (int64, error) { return st.dl.settle(ctx, st.db, st.s.settle, owner, outs) })
}

// Heartbeat records that relay id is alive and serves routes (as
// EncodeRoutes makes them), and returns all live relays (seen within ttl),
// sorted by id.
func (st *Store) Heartbeat(ctx context.Context, id, routes string, ttl time.Duration) ([]Relay, error) {
	if _, err := st.execRetry(ctx, st.s.registerRelay, id, routes); err != nil {
		return nil, err
	}
	return appendRows(ctx, st.db, nil, func(scan func(...any) error) (Relay, error) {
		var r Relay
		var routes *string
		err := scan(&r.ID, &routes)
		r.setRoutes(routes)
		return r, err
	}, st.s.liveRelays, ttl.Microseconds())
}

// queryColumn runs a query of one column and returns its values in row
// order.
func queryColumn[T any](ctx context.Context, q Querier, sql string, args ...any) ([]T, error) {
	return appendRows(ctx, q, nil, func(scan func(...any) error) (T, error) {
		var v T
		err := scan(&v)
		return v, err
	}, sql, args...)
}

// appendRows runs a query and appends to dst each of its rows as scanRow
// reads it with scan.
func appendRows[T any](ctx context.Context, q Querier, dst []T, scanRow func(scan func(...any) error) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scanRow(rows.Scan)
		if err != nil {
			return nil, err
		}
		dst = append(dst, v)
	}
	return dst, rows.Err()
}

// PruneRelays forgets relays not seen for longer than age.
func (st *Store) PruneRelays(ctx context.Context, age time.Duration) error {
	_, err := st.execRetry(ctx, st.s.pruneRelays, age.Microseconds())
	return err
}

// DropRelay forgets relay id and its view of the routes, and releases its
// leases.
func (st *Store) DropRelay(ctx context.Context, id string) error {
	if _, err := st.execRetry(ctx, st.s.releaseAll, id); err != nil {
		return err
	}
	if _, err := st.execRetry(ctx, st.s.dropRouteHealth, id); err != nil {
		return err
	}
	_, err := st.execRetry(ctx, st.s.dropRelay, id)
	return err
}

// RecordRoute records that relay sees route down (with reason) or up, from
// now (database time).
func (st *Store) RecordRoute(ctx context.Context, relay, route string, down bool, reason string) error {
	state := RouteUp
	if down {
		state = RouteDown
	}
	_, err := st.execRetry(ctx, st.s.recordRoute, relay, route, state, reason)
	return err
}

// routeHealthVersion is the migration that adds outbox_route_health.
const routeHealthVersion = 6

// RouteHealth lists what the live relays last recorded about their
// routes, by route then relay. Routes no relay ever saw down are not in
// it: they have been up since their relays started.
func (st *Store) RouteHealth(ctx context.Context) ([]RouteHealth, error) {
	rows, err := st.db.Query(ctx, st.s.routeHealth)
	if err != nil {
		if v, verr := SchemaVersion(ctx, st.db); verr == nil && v < routeHealthVersion {
			return nil, nil // a schema from before route health: nothing recorded
		}
		return nil, err
	}
	defer rows.Close()
	var out []RouteHealth
	for rows.Next() {
		var h RouteHealth
		var age float64
		if err := rows.Scan(&h.Route, &h.Relay, &h.State, &age, &h.Reason); err != nil {
			return nil, err
		}
		h.For = time.Duration(age * float64(time.Second)).Round(time.Millisecond)
		out = append(out, h)
	}
	return out, rows.Err()
}

// Partitions is the number of partitions (lease rows).
func (st *Store) Partitions(ctx context.Context) (int, error) {
	return queryInt(ctx, st.db, st.s.partitions)
}

// Acquire takes the free or expired partitions among parts for owner and
// returns every partition owner holds afterwards.
func (st *Store) Acquire(ctx context.Context, owner string, parts []int, ttl time.Duration) ([]Lease, error) {
	if len(parts) > 0 {
		if _, err := st.execRetry(ctx, st.s.acquire, owner, ttl.Microseconds(), st.dl.intList(parts), owner); err != nil {
			return nil, err
		}
	}
	return st.Held(ctx, owner)
}

// Held returns the partitions owner holds.
func (st *Store) Held(ctx context.Context, owner string) ([]Lease, error) {
	return appendRows(ctx, st.db, nil, func(scan func(...any) error) (Lease, error) {
		var l Lease
		var prev string
		err := scan(&l.Partition, &l.InflightMaxID, &prev)
		l.Taken = prev != "" && prev != owner
		return l, err
	}, st.s.held, owner)
}

// Renew extends owner's unexpired leases by ttl and returns how many.
func (st *Store) Renew(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	return st.execRetry(ctx, st.s.renew, ttl.Microseconds(), owner)
}

// Release gives up owner's leases on parts.
func (st *Store) Release(ctx context.Context, owner string, parts []int) error {
	if len(parts) == 0 {
		return nil
	}
	_, err := st.execRetry(ctx, st.s.release, owner, st.dl.intList(parts))
	return err
}

// MarkInflight records, before publishing, what a round is about to
// publish: for each of owner's partitions in parts, the highest id being
// published from it (maxIDs[i] for parts[i]; 0 when none). A relay that
// takes a partition over after a crash knows from it which messages may
// already be at their destination, or may have crashed the relay.
func (st *Store) MarkInflight(ctx context.Context, owner string, parts []int, maxIDs []int64) error {
	if len(parts) != len(maxIDs) {
		return errors.New("store: MarkInflight: parts and ids differ in length")
	}
	if len(parts) == 0 {
		return nil
	}
	args, err := st.dl.inflightArgs(owner, parts, maxIDs)
	if err != nil {
		return err
	}
	_, err = st.execRetry(ctx, st.s.markInflight, args...)
	return err
}

// Now is the database's clock.
func (st *Store) Now(ctx context.Context) (time.Time, error) {
	rows, err := st.db.Query(ctx, st.s.now)
	if err != nil {
		return time.Time{}, err
	}
	defer rows.Close()
	var f float64
	if rows.Next() {
		if err := rows.Scan(&f); err != nil {
			return time.Time{}, err
		}
	}
	return fromEpoch(f), rows.Err()
}

// Stats counts messages by status and topic and measures the oldest
// pending and oldest due messages' ages.
func (st *Store) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	rows, err := st.db.Query(ctx, st.s.countByStatusTopic)
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var tc TopicCount
		if err := rows.Scan(&tc.Status, &tc.Topic, &tc.Count); err != nil {
			rows.Close()
			return s, err
		}
		s.add(tc)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, err
	}
	if s.OldestPendingAge, err = st.age(ctx, st.s.oldestPending); err != nil {
		return s, err
	}
	s.OldestDueAge, err = st.age(ctx, st.s.oldestDue)
	return s, err
}

// add counts tc in s's totals and topics.
func (s *Stats) add(tc TopicCount) {
	switch tc.Status {
	case StatusPending:
		s.Pending += tc.Count
	case StatusSent:
		s.Sent += tc.Count
	case StatusConsumed:
		s.Consumed += tc.Count
	case StatusDead:
		s.Dead += tc.Count
	case StatusExpired:
		s.Expired += tc.Count
	}
	s.ByTopic = append(s.ByTopic, tc)
}

// age runs q, a query of one age in seconds (no row or NULL: 0).
func (st *Store) age(ctx context.Context, q string) (time.Duration, error) {
	rows, err := st.db.Query(ctx, q)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var age *float64
	if rows.Next() {
		if err := rows.Scan(&age); err != nil {
			return 0, err
		}
	}
	return seconds(age), rows.Err()
}

// where renders a Filter as a predicate and its arguments.
func (st *Store) where(f Filter) *cond {
	c := &cond{dl: st.dl}
	if f.Status != "" {
		c.add("status = {}", f.Status)
	}
	if f.Topic != "" {
		c.add("topic = {}", f.Topic)
	}
	if f.Topics != nil {
		c.addTopics(f.Topics)
	}
	if len(f.MessageIDs) > 0 {
		c.addAll(st.dl.messageIDTextIn(f.MessageIDs))
	}
	return c
}

// List returns messages matching f, oldest first.
func (st *Store) List(ctx context.Context, f Filter) ([]Message, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	c := st.where(f)
	dl := st.dl
	q := fmt.Sprintf(`SELECT id, %s, topic, coalesce(business_key, ''), payload, %s, status, attempts, max_attempts,
  %s, %s, %s, coalesce(last_error, '')
FROM outbox_messages WHERE %s ORDER BY id LIMIT %s`, dl.text("message_id"), dl.text("headers"),
		dl.epoch("available_at"), dl.epoch("created_at"), dl.epoch("sent_at"), c.sql(), c.arg(limit))
	return appendRows(ctx, st.db, nil, func(scan func(...any) error) (Message, error) {
		var m Message
		var avail, created float64
		var sent *float64
		if err := scan(&m.ID, &m.MessageID, &m.Topic, &m.Key, &m.Payload, &m.Headers, &m.Status, &m.Attempts, &m.MaxAttempts, &avail, &created, &sent, &m.LastError); err != nil {
			return m, err
		}
		m.AvailableAt, m.CreatedAt = fromEpoch(avail), fromEpoch(created)
		if sent != nil {
			t := fromEpoch(*sent)
			m.SentAt = &t
		}
		return m, nil
	}, q, c.args...)
}

// Requeue moves dead messages matching f back to pending with attempts reset.
func (st *Store) Requeue(ctx context.Context, f Filter) (int64, error) {
	f.Status = StatusDead
	c := st.where(f)
	return st.execRetry(ctx, `UPDATE outbox_messages SET status = 'pending', attempts = 0, unknown_outcome = `+st.dl.falseSQL()+`, available_at = `+st.dl.now()+` WHERE `+c.sql(), c.args...)
}

// Discard deletes dead messages matching f.
func (st *Store) Discard(ctx context.Context, f Filter) (int64, error) {
	f.Status = StatusDead
	c := st.where(f)
	return st.execRetry(ctx, `DELETE FROM outbox_messages WHERE `+c.sql(), c.args...)
}

// InboxClaim records messageID for consumer through q (the consumer's
// transaction) and reports whether this is its first record. A deadlock
// is the caller's to retry, with its whole transaction.
func (st *Store) InboxClaim(ctx context.Context, q Querier, consumer, messageID string) (bool, error) {
	n, err := q.Exec(ctx, st.s.inboxClaim, consumer, messageID)
	return n == 1, err
}

// InboxPurge deletes consumer's records older than age, at most limit at a
// time on databases that allow it, and returns how many it deleted.
func (st *Store) InboxPurge(ctx context.Context, consumer string, age time.Duration) (int64, error) {
	return st.execRetry(ctx, st.s.inboxPurge, consumer, age.Microseconds())
}

// MarkConsumed moves the sent message messageID to consumed (idempotent
// for one already consumed) and returns its status before the call:
// "" when no such message exists.
func (st *Store) MarkConsumed(ctx context.Context, messageID string) (string, error) {
	changed, err := st.ConsumeOne(ctx, messageID)
	var se *StatusError
	switch {
	case errors.Is(err, ErrNotFound):
		return "", nil
	case errors.As(err, &se):
		return se.Status, nil
	case err != nil:
		return "", err
	case changed:
		return StatusSent, nil
	}
	return StatusConsumed, nil
}
