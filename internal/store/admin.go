package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// PreviewChars is how many characters of the payload Search returns.
const PreviewChars = 200

// DefaultBulkBatch is how many rows one statement of a bulk change touches.
const DefaultBulkBatch = 1000

// DefaultReplayMax is how many messages one replay changes unless the
// operator confirms more ('outbox replay --yes', "yes": true in the admin
// API).
const DefaultReplayMax = 1000

// Search selects messages for operators. Empty fields match all.
type Search struct {
	Status    string
	Topic     string
	Key       string
	MessageID string
	// Since and Until bound created_at: Since <= created_at < Until.
	Since, Until time.Time
	// Before, when positive, keeps rows with id < Before (keyset paging).
	Before int64
	// Limit is the most rows returned; 0 means 50.
	Limit int
}

// Record is a message as operators see it.
type Record struct {
	ID        int64
	MessageID string
	Topic     string
	Key       *string
	Status    string
	// TableStatus is an adopted table's own status value ("" for
	// outbox_messages).
	TableStatus string
	Attempts    int
	MaxAttempts int
	CreatedAt   time.Time
	AvailableAt time.Time
	SentAt      *time.Time
	ConsumedAt  *time.Time
	LastError   *string
	// Payload is the whole body from Get, its first PreviewChars
	// characters from Search.
	Payload string
	// Headers is the headers JSON text from Get; from Search, only those
	// of a sealed or claim-checked payload ("" otherwise), so that a list
	// can say so in place of the preview.
	Headers string
}

// StatusError reports a message whose status does not allow the change.
type StatusError struct{ Status string }

func (e *StatusError) Error() string { return "message is " + e.Status }

// Is makes errors.Is(err, ErrWrongStatus) true.
func (e *StatusError) Is(target error) bool { return target == ErrWrongStatus }

// ErrWrongStatus is matched by every *StatusError.
var ErrWrongStatus = errors.New("wrong status")

// BulkAction is a change applied to many messages at once.
type BulkAction string

// The bulk actions.
const (
	// ActionRequeue: dead (or waiting pending) → pending now, attempts reset.
	ActionRequeue BulkAction = "requeue"
	// ActionDiscard deletes dead messages.
	ActionDiscard BulkAction = "discard"
	// ActionConsumed: sent → consumed.
	ActionConsumed BulkAction = "consumed"
	// ActionReplay: sent or consumed → pending now, attempts reset, with
	// the same message id; with BulkFilter.Archive also rows of
	// outbox_messages_archive, moved back into outbox_messages.
	ActionReplay BulkAction = "replay"
)

// BulkFilter selects the messages of a bulk change. Empty fields match all;
// Status defaults to the status the action applies to (see CheckBulk).
type BulkFilter struct {
	Status string
	Topic  string
	// Topics, when not nil, selects only messages whose topic is one of
	// them (none when it is empty), at most MaxTopics: the topics a route
	// pattern matches (see TopicsLike).
	Topics     []string
	Key        string
	MessageIDs []string
	Since      time.Time
	Until      time.Time
	// Archive also selects the matching rows of outbox_messages_archive
	// (ActionReplay only).
	Archive bool
	// NotSealedUnder leaves out messages whose payload is sealed under
	// one of these key ids (header outbox-seal-key): erased keys, whose
	// messages a replay skips. At most MaxTopics.
	NotSealedUnder []string
}

// BulkOptions tunes a bulk change.
type BulkOptions struct {
	// BatchSize is how many rows one statement changes; 0 means
	// DefaultBulkBatch.
	BatchSize int
	// Progress, when set, is called after every batch with the rows
	// changed so far.
	Progress func(changed int64)
}

// CheckBulk fills in f's default status for a and reports a status the
// action cannot apply to.
func CheckBulk(a BulkAction, f *BulkFilter) error {
	switch a {
	case ActionRequeue:
		if f.Status == "" {
			f.Status = StatusDead
		}
		if f.Status != StatusDead && f.Status != StatusPending && f.Status != StatusExpired {
			return errors.New("requeue applies to dead, expired or pending messages, not " + f.Status)
		}
	case ActionDiscard:
		if f.Status == "" {
			f.Status = StatusDead
		}
		if f.Status != StatusDead && f.Status != StatusExpired {
			return errors.New("discard applies to dead or expired messages only, not " + f.Status)
		}
	case ActionConsumed:
		if f.Status == "" {
			f.Status = StatusSent
		}
		if f.Status != StatusSent {
			return errors.New("consumed applies to sent messages only, not " + f.Status)
		}
	case ActionReplay:
		// "" selects both.
		if f.Status != "" && f.Status != StatusSent && f.Status != StatusConsumed {
			return errors.New("replay applies to sent or consumed messages, not " + f.Status)
		}
	default:
		return errors.New("unknown bulk action " + quote(string(a)))
	}
	if f.Archive && a != ActionReplay {
		return errors.New("only replay reads the archive")
	}
	return nil
}

// statusLiteral is status as a SQL literal ("" for ""). Statuses are
// written into the statement rather than bound, so that planners can
// match the partial indexes on status (a bound value cannot prove a
// partial index's predicate).
func statusLiteral(status string) (string, error) {
	switch status {
	case "":
		return "", nil
	case StatusPending, StatusSent, StatusConsumed, StatusDead, StatusExpired:
		return "'" + status + "'", nil
	}
	return "", errors.New("unknown status " + quote(status))
}

// cond collects predicates and their arguments; "{}" in a predicate
// becomes the next placeholder.
type cond struct {
	dl    dialect
	parts []string
	args  []any
}

func (c *cond) add(pred string, args ...any) {
	for _, a := range args {
		pred = strings.Replace(pred, "{}", c.dl.ph(len(c.args)+1), 1)
		c.args = append(c.args, a)
	}
	c.parts = append(c.parts, pred)
}

// addAll is add for a predicate and its arguments as one value, as the
// dialect's list predicates return them.
func (c *cond) addAll(pred string, args []any) { c.add(pred, args...) }

// arg records a and returns its placeholder.
func (c *cond) arg(a any) string {
	c.args = append(c.args, a)
	return c.dl.ph(len(c.args))
}

// MaxTopics is the most topics a Filter or BulkFilter lists: each is a
// bound parameter of the statement.
const MaxTopics = 1000

// addTopics adds "topic is one of topics", each a bound parameter;
// nothing matches when there are none.
func (c *cond) addTopics(topics []string) {
	if len(topics) == 0 {
		c.add("1=0")
		return
	}
	args := make([]any, len(topics))
	for i, t := range topics {
		args[i] = t
	}
	c.add("topic IN ("+strings.TrimSuffix(strings.Repeat("{}, ", len(topics)), ", ")+")", args...)
}

func (c *cond) sql() string {
	if len(c.parts) == 0 {
		return "1=1"
	}
	return strings.Join(c.parts, " AND ")
}

// addTimes adds Since <= created_at < Until.
func (c *cond) addTimes(since, until time.Time) {
	since, until, none := c.dl.createdRange(since, until)
	if none {
		c.add("1=0")
		return
	}
	if !since.IsZero() {
		expr, arg := c.dl.timeArg(since)
		c.add("created_at >= "+expr, arg)
	}
	if !until.IsZero() {
		expr, arg := c.dl.timeArg(until)
		c.add("created_at < "+expr, arg)
	}
}

// HeadersJSON is a headers column value as JSON for output: the object
// as stored, or, for text that is not a JSON object (written by a foreign
// producer), that text as a JSON string.
func HeadersJSON(h string) json.RawMessage {
	t := bytes.TrimSpace([]byte(h))
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	b, _ := json.Marshal(h)
	return b
}

// validUUID reports whether s can be compared with message_id without a
// cast error on PostgreSQL.
func validUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// recordCols are the columns Search and Get read, payload last.
func (st *Store) recordCols(payload string) string {
	dl := st.dl
	headers := labelledHeaders(dl)
	if payload == "payload" {
		headers = dl.text("headers")
	}
	return "id, " + dl.text("message_id") + ", topic, business_key, " + st.status() + ", attempts, max_attempts, " +
		dl.epoch("created_at") + ", " + dl.epoch("available_at") + ", " + dl.epoch("sent_at") + ", " + dl.epoch("consumed_at") +
		", last_error, " + headers + ", " + payload
}

func scanRecord(rows Rows) (Record, error) {
	var r Record
	var created, avail float64
	var sent, consumed *float64
	if err := rows.Scan(&r.ID, &r.MessageID, &r.Topic, &r.Key, &r.Status, &r.Attempts, &r.MaxAttempts,
		&created, &avail, &sent, &consumed, &r.LastError, &r.Headers, &r.Payload); err != nil {
		return r, err
	}
	r.CreatedAt, r.AvailableAt = FromEpoch(created), FromEpoch(avail)
	if sent != nil {
		t := FromEpoch(*sent)
		r.SentAt = &t
	}
	if consumed != nil {
		t := FromEpoch(*consumed)
		r.ConsumedAt = &t
	}
	return r, nil
}

// Search returns the messages s selects, newest (highest id) first, with
// a payload preview.
func (st *Store) Search(ctx context.Context, s Search) ([]Record, error) {
	c := &cond{dl: st.dl}
	from := "outbox_messages"
	status, err := statusLiteral(s.Status)
	if err != nil {
		return nil, err
	}
	switch {
	case status != "" && st.snapshot:
		c.add(SnapshotStatus + " = " + status)
	case status != "":
		hint, pred := st.dl.searchStatus(status, s.Status == StatusPending, s.Topic != "")
		from += hint
		c.add(pred)
	}
	if s.Topic != "" {
		c.add("topic = {}", s.Topic)
	}
	if s.Key != "" {
		c.add("business_key = {}", s.Key)
	}
	if s.MessageID != "" {
		if !validUUID(s.MessageID) {
			return nil, nil
		}
		c.add(st.dl.msgIDEq(), strings.ToLower(s.MessageID))
	}
	c.addTimes(s.Since, s.Until)
	if s.Before > 0 {
		c.add("id < {}", s.Before)
	}
	limit := s.Limit
	if limit <= 0 {
		limit = 50
	}
	q := "SELECT " + st.recordCols(st.dl.preview("payload", PreviewChars)) + " FROM " + from + " WHERE " + c.sql() + " ORDER BY id DESC LIMIT " + c.arg(limit)
	rows, err := st.db.Query(ctx, q, c.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]Record, 0, limit)
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Get returns the message messageID with its whole payload and headers,
// or ErrNotFound.
func (st *Store) Get(ctx context.Context, messageID string) (Record, error) {
	if !validUUID(messageID) {
		return Record{}, ErrNotFound
	}
	c := &cond{dl: st.dl}
	c.add(st.dl.msgIDEq(), strings.ToLower(messageID))
	rows, err := st.db.Query(ctx, "SELECT "+st.recordCols("payload")+" FROM outbox_messages WHERE "+c.sql(), c.args...)
	if err != nil {
		return Record{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Record{}, err
		}
		return Record{}, ErrNotFound
	}
	r, err := scanRecord(rows)
	if err != nil {
		return Record{}, err
	}
	return r, rows.Err()
}

// status is the status column as the relays see it: SnapshotStatus on a
// database read by snapshots.
func (st *Store) status() string {
	if st.snapshot {
		return SnapshotStatus
	}
	return "status"
}

// statusOf is the status of messageID, "" when there is no such message.
func (st *Store) statusOf(ctx context.Context, messageID string) (string, error) {
	c := &cond{dl: st.dl}
	c.add(st.dl.msgIDEq(), messageID)
	rows, err := st.db.Query(ctx, "SELECT "+st.status()+" FROM outbox_messages WHERE "+c.sql(), c.args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var s string
	if rows.Next() {
		if err := rows.Scan(&s); err != nil {
			return "", err
		}
	}
	return s, rows.Err()
}

// one runs stmt, a change of the message messageID guarded by its status
// ("{id}" in stmt is the message id test), and explains a change that did
// not happen: ErrNotFound or a *StatusError.
func (st *Store) one(ctx context.Context, messageID, stmt string) error {
	if !validUUID(messageID) {
		return ErrNotFound
	}
	messageID = strings.ToLower(messageID)
	c := &cond{dl: st.dl}
	c.add(st.dl.msgIDEq(), messageID)
	n, err := st.ExecRetry(ctx, strings.Replace(stmt, "{id}", c.sql(), 1), c.args...)
	if err != nil || n > 0 {
		return err
	}
	s, err := st.statusOf(ctx, messageID)
	switch {
	case err != nil:
		return err
	case s == "":
		return ErrNotFound
	}
	return &StatusError{Status: s}
}

func (st *Store) requeueSet() string {
	// MySQL assigns left to right with the new values: read the old
	// status before overwriting it. An expired message comes back without
	// its expiry, or it would expire again at once.
	return "unknown_outcome = CASE WHEN status = 'dead' THEN " + st.dl.falseSQL() + " ELSE unknown_outcome END, " +
		"expires_at = CASE WHEN status = 'expired' THEN NULL ELSE expires_at END, " +
		"status = 'pending', attempts = 0, available_at = " + st.dl.now()
}

// RequeueOne moves the dead, expired or pending message messageID to
// pending, available now, attempts reset (an expired one without its
// expiry). It returns ErrNotFound or a *StatusError (sent, consumed) when
// nothing changed.
func (st *Store) RequeueOne(ctx context.Context, messageID string) error {
	return st.one(ctx, messageID, "UPDATE outbox_messages SET "+st.requeueSet()+" WHERE {id} AND "+st.status()+" IN ('dead', 'expired', 'pending')")
}

// DiscardOne deletes the dead or expired message messageID; ErrNotFound
// or a *StatusError when nothing changed.
func (st *Store) DiscardOne(ctx context.Context, messageID string) error {
	return st.one(ctx, messageID, "DELETE FROM outbox_messages WHERE {id} AND "+st.status()+" IN ('dead', 'expired')")
}

// ConsumeOne moves the sent message messageID to consumed and reports
// whether it changed; a message already consumed is left as it is
// (false, nil). ErrNotFound or a *StatusError (pending, dead) otherwise.
func (st *Store) ConsumeOne(ctx context.Context, messageID string) (bool, error) {
	err := st.one(ctx, messageID, "UPDATE outbox_messages SET status = 'consumed', consumed_at = "+st.dl.now()+" WHERE {id} AND "+st.status()+" = 'sent'")
	var se *StatusError
	if errors.As(err, &se) && se.Status == StatusConsumed {
		return false, nil
	}
	return err == nil, err
}

// bulkCond is the predicate of a bulk change of table's rows
// (outbox_messages or the archive), including the status the action
// applies to (requeue of pending rows takes only those waiting).
func (st *Store) bulkCond(table string, f BulkFilter) *cond {
	c := &cond{dl: st.dl}
	status := "status"
	if table == "outbox_messages" {
		status = st.status()
	}
	if lit, _ := statusLiteral(f.Status); lit != "" { // CheckBulk allowed it
		c.add(status + " = " + lit)
	} else {
		c.add(status + delivered) // replay of sent and consumed messages
	}
	if f.Status == StatusPending {
		c.add("available_at > " + st.dl.now())
	}
	if f.Topic != "" {
		c.add("topic = {}", f.Topic)
	}
	if f.Topics != nil {
		c.addTopics(f.Topics)
	}
	if f.Key != "" {
		c.add("business_key = {}", f.Key)
	}
	if len(f.MessageIDs) > 0 {
		ids := make([]string, 0, len(f.MessageIDs))
		for _, id := range f.MessageIDs {
			if validUUID(id) {
				ids = append(ids, strings.ToLower(id))
			}
		}
		if len(ids) == 0 {
			c.add("1=0")
		} else {
			c.addAll(st.dl.messageIDsIn(ids))
		}
	}
	c.addTimes(f.Since, f.Until)
	if len(f.NotSealedUnder) > 0 {
		c.addNotSealedUnder(f.NotSealedUnder)
	}
	return c
}

func (st *Store) queryInt64s(ctx context.Context, q string, args ...any) ([]int64, error) {
	rows, err := st.db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v *int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		if v != nil {
			out = append(out, *v)
		}
	}
	return out, rows.Err()
}

// delivered follows the status in the predicate of a replay's rows.
const delivered = " IN ('sent', 'consumed')"

// CountBulk is how many messages the bulk action a would change now
// (with f.Archive, in both tables).
func (st *Store) CountBulk(ctx context.Context, a BulkAction, f BulkFilter) (int64, error) {
	if err := CheckBulk(a, &f); err != nil {
		return 0, err
	}
	c := st.bulkCond("outbox_messages", f)
	n, err := st.queryInt64s(ctx, "SELECT count(*) FROM outbox_messages WHERE "+c.sql(), c.args...)
	if err != nil || len(n) == 0 || !f.Archive {
		return sum(n), err
	}
	c = st.bulkCond(archiveTable, f)
	c.add(archivedOnly)
	more, err := st.queryInt64s(ctx, "SELECT count(*) FROM "+archiveTable+" AS a WHERE "+c.sql(), c.args...)
	return sum(n) + sum(more), err
}

func sum(ns []int64) int64 {
	var t int64
	for _, n := range ns {
		t += n
	}
	return t
}

// Bulk applies a to the messages f selects, in batches of
// opts.BatchSize rows, each its own statement and transaction, so a
// change of millions of rows never holds one long transaction. Messages
// that match only after the call started are left alone. It returns how
// many rows changed, also when it stops early on an error. A replay with
// f.Archive goes on to move the matching archived rows back (see
// replayArchived).
func (st *Store) Bulk(ctx context.Context, a BulkAction, f BulkFilter, opts BulkOptions) (int64, error) {
	if err := CheckBulk(a, &f); err != nil {
		return 0, err
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBulkBatch
	}
	var guard, change string
	status := st.status()
	switch a {
	case ActionRequeue:
		guard = status + " = 'dead'"
		switch f.Status {
		case StatusPending:
			guard = status + " = 'pending' AND available_at > " + st.dl.now()
		case StatusExpired:
			guard = status + " = 'expired'"
		}
		change = "UPDATE outbox_messages SET " + st.requeueSet() + " WHERE "
	case ActionDiscard:
		guard = status + " = 'dead'"
		if f.Status == StatusExpired {
			guard = status + " = 'expired'"
		}
		change = "DELETE FROM outbox_messages WHERE "
	case ActionConsumed:
		guard = status + " = 'sent'"
		change = "UPDATE outbox_messages SET status = 'consumed', consumed_at = " + st.dl.now() + " WHERE "
	case ActionReplay:
		guard = status + delivered
		change = "UPDATE outbox_messages SET status = 'pending', attempts = 0, available_at = " + st.dl.now() +
			", sent_at = NULL, consumed_at = NULL, last_error = NULL, unknown_outcome = " + st.dl.falseSQL()
		if st.snapshot {
			// A delivered row of the snapshot domain stays pending behind
			// its partition's cursor: it is read again from the table.
			change += ", outbox_txid = NULL"
		}
		change += " WHERE "
	}
	total, err := st.batches(ctx, "outbox_messages", f, opts, 0, func(ids []int64) (int64, error) {
		upd := &cond{dl: st.dl}
		upd.addAll(st.dl.idsIn(ids))
		upd.add(guard)
		return st.ExecRetry(ctx, change+upd.sql(), upd.args...)
	})
	if err != nil || !f.Archive {
		return total, err
	}
	return st.batches(ctx, archiveTable, f, opts, total, func(ids []int64) (int64, error) {
		return st.retry(ctx, func() (n int64, err error) {
			err = st.inTx(ctx, func(q Querier) error {
				n, err = st.replayArchived(ctx, q, ids)
				return err
			})
			return n, err
		})
	})
}

// batches walks the rows of table that f selects, up to the highest id
// at the start, in id order, opts.BatchSize at a time, calling change
// with each batch's ids; it returns done plus the rows changed.
func (st *Store) batches(ctx context.Context, table string, f BulkFilter, opts BulkOptions, done int64, change func(ids []int64) (int64, error)) (int64, error) {
	top, err := st.queryInt64s(ctx, "SELECT max(id) FROM "+table)
	if err != nil || len(top) == 0 {
		return done, err
	}
	total := done
	for after := int64(0); ; {
		sel := st.bulkCond(table, f)
		sel.add("id > {}", after)
		sel.add("id <= {}", top[0])
		q := "SELECT id FROM " + table + " WHERE " + sel.sql() + " ORDER BY id LIMIT " + sel.arg(opts.BatchSize)
		ids, err := st.queryInt64s(ctx, q, sel.args...)
		if err != nil {
			return total, err
		}
		if len(ids) == 0 {
			return total, nil
		}
		n, err := change(ids)
		total += n
		if err != nil {
			return total, err
		}
		if opts.Progress != nil {
			opts.Progress(total)
		}
		if len(ids) < opts.BatchSize {
			return total, nil
		}
		after = ids[len(ids)-1]
	}
}

// archiveTable is where retention with archiving moves settled rows.
const archiveTable = "outbox_messages_archive"

// archivedOnly keeps archived rows (alias a) whose message id is not back
// in outbox_messages (enqueued again, or replayed already): a message id
// is unique there.
const archivedOnly = "NOT EXISTS (SELECT 1 FROM outbox_messages AS m WHERE m.message_id = a.message_id)"

// replayArchived moves the listed archived rows that are sent or consumed
// back into outbox_messages as pending, with their id, message id,
// created_at and content, and deletes them from the archive, in q's
// transaction: a message is in exactly one of the two tables throughout.
// It returns how many rows moved.
func (st *Store) replayArchived(ctx context.Context, q Querier, ids []int64) (int64, error) {
	ins := &cond{dl: st.dl}
	ins.addAll(st.dl.idsIn(ids))
	ins.add("status" + delivered)
	ins.add(archivedOnly)
	_, err := q.Exec(ctx, "INSERT INTO outbox_messages (id, message_id, topic, business_key, payload, headers, status, attempts, max_attempts, available_at, created_at, unknown_outcome) "+
		"SELECT id, message_id, topic, business_key, payload, headers, 'pending', 0, max_attempts, "+st.dl.now()+", created_at, "+st.dl.falseSQL()+
		" FROM "+archiveTable+" AS a WHERE "+ins.sql(), ins.args...)
	if err != nil {
		return 0, err
	}
	back := &cond{dl: st.dl}
	back.addAll(st.dl.idsIn(ids))
	moved, err := queryColumn[int64](ctx, q, "SELECT id FROM outbox_messages WHERE "+back.sql(), back.args...)
	if err != nil || len(moved) == 0 {
		return 0, err
	}
	del := &cond{dl: st.dl}
	del.addAll(st.dl.idsIn(moved))
	n, err := q.Exec(ctx, "DELETE FROM "+archiveTable+" WHERE "+del.sql(), del.args...)
	if err == nil && n != int64(len(moved)) {
		err = fmt.Errorf("replay: deleted %d of %d archived rows", n, len(moved))
	}
	return n, err
}

// likeEscaper escapes the LIKE wildcards of a literal, with '!' as the
// escape character: every database takes it in an ESCAPE clause the same
// way (a backslash is an escape in MySQL's string literals too).
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// TopicLike is a LIKE pattern (escape character '!') that every topic
// the route pattern matches is like: its literal segments escaped, each
// wildcard segment ("*", ">", or "*" alone) '%'. It may be like more
// topics than the pattern matches ('%' spans dots; MySQL and SQLite
// compare without case), so callers check what TopicsLike finds against
// the pattern.
func TopicLike(pattern string) string {
	segs := strings.Split(pattern, ".")
	for i, s := range segs {
		if s == "*" || s == ">" {
			segs[i] = "%"
		} else {
			segs[i] = likeEscaper.Replace(s)
		}
	}
	return strings.Join(segs, ".")
}

// TopicsLike is the distinct topics, sorted, of the messages the bulk
// action a would change now with f (f.Topic and f.Topics left out; with
// f.Archive, in both tables) that are LIKE like (a TopicLike pattern,
// bound as a parameter).
func (st *Store) TopicsLike(ctx context.Context, a BulkAction, f BulkFilter, like string) ([]string, error) {
	if err := CheckBulk(a, &f); err != nil {
		return nil, err
	}
	f.Topic, f.Topics = "", nil
	tables := []string{"outbox_messages"}
	if f.Archive {
		tables = append(tables, archiveTable)
	}
	var out []string
	for _, table := range tables {
		c := st.bulkCond(table, f)
		c.add("topic LIKE {} ESCAPE '!'", like)
		ts, err := queryColumn[string](ctx, st.db, "SELECT DISTINCT topic FROM "+table+" WHERE "+c.sql(), c.args...)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// AuditEntry is one row of outbox_audit.
type AuditEntry struct {
	ID     int64
	At     time.Time
	Actor  string
	Action string
	Target string
	Count  int64
}

// InsertAudit records an operator's change.
func (st *Store) InsertAudit(ctx context.Context, e AuditEntry) error {
	c := &cond{dl: st.dl}
	values := c.arg(e.Actor) + ", " + c.arg(e.Action) + ", " + c.arg(e.Target) + ", " + c.arg(e.Count)
	_, err := st.db.Exec(ctx, "INSERT INTO outbox_audit (actor, action, target, count) VALUES ("+values+")", c.args...)
	return err
}

// Audit returns the newest limit audit entries, newest first.
func (st *Store) Audit(ctx context.Context, limit int) ([]AuditEntry, error) {
	rows, err := st.db.Query(ctx, "SELECT id, "+st.dl.epoch("at")+", actor, action, target, count FROM outbox_audit ORDER BY id DESC LIMIT "+st.dl.ph(1), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		var at float64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &e.Count); err != nil {
			return nil, err
		}
		e.At = FromEpoch(at)
		out = append(out, e)
	}
	return out, rows.Err()
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
		s.Add(tc)
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

// Add counts tc in s's totals and topics.
func (s *Stats) Add(tc TopicCount) {
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
	return Seconds(age), rows.Err()
}

// where renders a Filter as a predicate and its arguments.
func (st *Store) where(f Filter) *cond {
	c := &cond{dl: st.dl}
	if f.Status != "" {
		c.add(st.status()+" = {}", f.Status)
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
	q := fmt.Sprintf(`SELECT id, %s, topic, coalesce(business_key, ''), payload, %s, %s, attempts, max_attempts,
  %s, %s, %s, coalesce(last_error, '')
FROM outbox_messages WHERE %s ORDER BY id LIMIT %s`, dl.text("message_id"), dl.text("headers"), st.status(),
		dl.epoch("available_at"), dl.epoch("created_at"), dl.epoch("sent_at"), c.sql(), c.arg(limit))
	return AppendRows(ctx, st.db, nil, func(scan func(...any) error) (Message, error) {
		var m Message
		var avail, created float64
		var sent *float64
		if err := scan(&m.ID, &m.MessageID, &m.Topic, &m.Key, &m.Payload, &m.Headers, &m.Status, &m.Attempts, &m.MaxAttempts, &avail, &created, &sent, &m.LastError); err != nil {
			return m, err
		}
		m.AvailableAt, m.CreatedAt = FromEpoch(avail), FromEpoch(created)
		if sent != nil {
			t := FromEpoch(*sent)
			m.SentAt = &t
		}
		return m, nil
	}, q, c.args...)
}

// Requeue moves dead messages matching f back to pending with attempts reset.
func (st *Store) Requeue(ctx context.Context, f Filter) (int64, error) {
	f.Status = StatusDead
	c := st.where(f)
	return st.ExecRetry(ctx, `UPDATE outbox_messages SET status = 'pending', attempts = 0, unknown_outcome = `+st.dl.falseSQL()+`, available_at = `+st.dl.now()+` WHERE `+c.sql(), c.args...)
}

// Discard deletes dead messages matching f.
func (st *Store) Discard(ctx context.Context, f Filter) (int64, error) {
	f.Status = StatusDead
	c := st.where(f)
	return st.ExecRetry(ctx, `DELETE FROM outbox_messages WHERE `+c.sql(), c.args...)
}
