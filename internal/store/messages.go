package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

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

// ReadBound is the longest payload, in bytes, that a relay read loads
// (from WithPayloadLimit's limit): a read measures every payload and
// leaves out those longer.
func (st *Store) ReadBound() int64 {
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
	return st.ExecRetry(ctx, st.s.expire, owner)
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
		return st.ExecRetry(ctx, `UPDATE outbox_messages AS m SET status = 'expired', available_at = now(), last_error = $2
WHERE m.id = ANY($1::bigint[]) AND m.status = 'pending'
  AND (SELECT l.owner = $3 AND l.expires_at > now() FROM outbox_leases AS l WHERE l.partition_no = m.partition_no)`, ids, reason, owner)
	case MySQL:
		args := []any{reason}
		for _, id := range ids {
			args = append(args, id)
		}
		return st.ExecRetry(ctx, `UPDATE outbox_messages AS m JOIN outbox_leases AS l ON l.partition_no = m.partition_no
SET m.status = 'expired', m.available_at = NOW(6), m.last_error = ?
WHERE m.id IN (`+placeholdersQ(len(ids))+`) AND m.status = 'pending' AND l.owner = ? AND l.expires_at > NOW(6)`, append(args, owner)...)
	default:
		args := []any{reason}
		for _, id := range ids {
			args = append(args, id)
		}
		return st.ExecRetry(ctx, `UPDATE outbox_messages SET status = 'expired', available_at = `+sqliteNow+`, last_error = ?
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
	args := append(pg.settleArgs(outs), owner, st.dl.intList(parts), limit, st.ReadBound())
	_, err = st.retry(ctx, func() (int64, error) {
		var err error
		rows, err = AppendRows(ctx, st.db, make([]Row, 0, limit+1), func(scan func(...any) error) (Row, error) {
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
// bytes (ReadBound), the partitions and the limit, then more.
func (st *Store) read(ctx context.Context, stmt string, parts any, limit int, more ...any) ([]Row, error) {
	return AppendRows(ctx, st.db, make([]Row, 0, limit), func(scan func(...any) error) (Row, error) {
		r, _, err := scanRow[any](scan)
		return r, err
	}, stmt, append([]any{st.ReadBound(), parts, limit}, more...)...)
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
		r.CreatedAt = FromEpoch(*created)
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

// FromEpoch is the time f seconds after the Unix epoch, in UTC: how the
// store reads the times its statements render as epoch seconds.
func FromEpoch(f float64) time.Time {
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
