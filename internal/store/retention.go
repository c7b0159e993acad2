package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// beforeRemove holds, per *Store, a function tests run between a window
// and its delete, to change rows meanwhile.
var beforeRemove sync.Map

// RetentionPolicy says which settled rows have outlived their retention.
type RetentionPolicy struct {
	// Sent: sent and consumed rows go this long after sent_at (created_at
	// when a row has no sent_at).
	Sent time.Duration
	// Dead: dead rows go this long after their last attempt fell due
	// (available_at, or created_at when that is later).
	Dead time.Duration
	// Archive moves the rows into outbox_messages_archive instead of
	// deleting them.
	Archive bool
}

// RetentionBatch is what one Retain call saw and did.
type RetentionBatch struct {
	// Scanned is how many rows the window held (fewer than the limit: the
	// window reached the end of the table).
	Scanned int
	// Removed is how many rows were deleted (or moved to the archive).
	Removed int64
	// LastID is the highest id in the window, 0 when it was empty.
	LastID int64
	// FirstKept is the lowest id in the window left in place (pending,
	// within its retention, or changed meanwhile), 0 when none was.
	FirstKept int64
	// FirstYoung is the lowest id in the window created within the shorter
	// retention: no row from there on can be due yet, except rows
	// committed late. 0 when none was.
	FirstYoung int64
}

// retentionStatements are the retention statements of one dialect.
type retentionStatements struct {
	// window lists the next rows after an id with, per row, whether it is
	// due and whether it is younger than the shorter retention.
	window string
	// remove deletes the listed rows that are (still) due.
	remove string
	// move deletes the listed due rows and archives them in one statement
	// (PostgreSQL only).
	move string
	// lock locks the listed due rows and returns their ids (MySQL).
	lock string
	// archive copies the listed rows into the archive; on SQLite it
	// checks they are due and returns their ids.
	archive string
	// purge deletes the listed rows unconditionally, after archive.
	purge string
}

// archiveColumns are the columns outbox_messages and its archive share.
const archiveColumns = "id, message_id, topic, business_key, payload, headers, status, attempts, max_attempts, available_at, created_at, sent_at, consumed_at, last_error, unknown_outcome"

// dueSQL is the predicate "row m has outlived its retention", with the
// sent and dead retentions in microseconds at placeholders sent and dead.
// Pending rows are never due.
func (d Dialect) dueSQL(m string, sent, dead int) string {
	greatest := "greatest"
	switch d {
	case MySQL:
		greatest = "GREATEST"
	case SQLite:
		greatest = "max"
	}
	return "((" + m + "status IN ('sent', 'consumed') AND coalesce(" + m + "sent_at, " + m + "created_at) < " + d.minusMicros(d.ph(sent)) + ")" +
		" OR (" + m + "status = 'dead' AND " + greatest + "(" + m + "created_at, " + m + "available_at) < " + d.minusMicros(d.ph(dead)) + "))"
}

// idsIn is the predicate "col is one of the row ids in placeholder n"
// (PostgreSQL, SQLite; MySQL joins mysqlIDs instead).
func (d Dialect) idsIn(col string, n int) string {
	switch d {
	case Postgres:
		return col + " = ANY(" + d.ph(n) + "::bigint[])"
	case SQLite:
		return col + " IN (SELECT value FROM json_each(" + d.ph(n) + "))"
	}
	panic("idsIn: not for " + string(d))
}

// retention holds each dialect's retention statements, fixed at start-up.
var retention = map[Dialect]retentionStatements{
	Postgres: buildRetention(Postgres),
	MySQL:    buildRetention(MySQL),
	SQLite:   buildRetention(SQLite),
}

// mysqlIDs is a table of the row ids in a JSON array argument.
const mysqlIDs = "JSON_TABLE(?, '$[*]' COLUMNS (v BIGINT PATH '$')) AS u"

func buildRetention(d Dialect) retentionStatements { return buildRetentionOn(d, "outbox_messages") }

// buildRetentionOn builds d's retention statements over table, a checked
// name: outbox_messages, or one of its partitions on PostgreSQL.
func buildRetentionOn(d Dialect, table string) retentionStatements {
	var s retentionStatements
	// Placeholders are numbered in order of appearance, as "?" needs.
	s.window = `SELECT id, CASE WHEN ` + d.dueSQL("", 1, 2) + ` THEN 1 ELSE 0 END,
       CASE WHEN created_at > ` + d.minusMicros(d.ph(3)) + ` THEN 1 ELSE 0 END
FROM ` + table + ` WHERE id > ` + d.ph(4) + ` ORDER BY id LIMIT ` + d.ph(5)
	switch d {
	case Postgres:
		s.remove = `DELETE FROM ` + table + ` WHERE ` + d.idsIn("id", 1) + ` AND ` + d.dueSQL("", 2, 3)
		// One statement: a row is either still in outbox_messages or in
		// the archive, never both and never neither. A row requeued
		// meanwhile is re-checked against its new version and stays.
		s.move = `WITH gone AS (
    DELETE FROM ` + table + ` WHERE ` + d.idsIn("id", 1) + ` AND ` + d.dueSQL("", 2, 3) + `
    RETURNING ` + archiveColumns + `)
INSERT INTO outbox_messages_archive (` + archiveColumns + `)
SELECT ` + archiveColumns + ` FROM gone`
	case MySQL:
		// A multi-table DELETE joins the id list (MariaDB runs a single-
		// table DELETE … IN (subquery) as a scan of the whole table), and
		// the join starts from the list and looks each row up by primary
		// key: left to itself, the planner may walk the status index
		// instead, over every settled row.
		byID := mysqlIDs + ` STRAIGHT_JOIN outbox_messages AS m FORCE INDEX (PRIMARY) ON m.id = u.v`
		s.remove = `DELETE m FROM ` + byID + ` WHERE ` + d.dueSQL("m.", 2, 3)
		s.lock = `SELECT m.id FROM ` + byID + ` WHERE ` + d.dueSQL("m.", 2, 3) + ` ORDER BY m.id FOR UPDATE`
		s.archive = `INSERT INTO outbox_messages_archive (` + archiveColumns + `)
SELECT m.id, m.message_id, m.topic, m.business_key, m.payload, m.headers, m.status, m.attempts, m.max_attempts, m.available_at, m.created_at, m.sent_at, m.consumed_at, m.last_error, m.unknown_outcome
FROM ` + byID
		s.purge = `DELETE m FROM ` + byID
	default:
		s.remove = `DELETE FROM outbox_messages WHERE ` + d.idsIn("id", 1) + ` AND ` + d.dueSQL("", 2, 3)
		// The transaction holds SQLite's write lock from its start, so
		// nothing changes between the copy and the delete.
		s.archive = `INSERT INTO outbox_messages_archive (` + archiveColumns + `)
SELECT ` + archiveColumns + ` FROM outbox_messages WHERE ` + d.idsIn("id", 1) + ` AND ` + d.dueSQL("", 2, 3) + `
RETURNING id`
		s.purge = `DELETE FROM outbox_messages WHERE ` + d.idsIn("id", 1)
	}
	return s
}

// ids renders message row ids as the dialect's list argument.
func (st *Store) ids(v []int64) any {
	if st.d == Postgres {
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Retain looks at up to limit rows after id after, in id order, and
// deletes (or, with p.Archive, moves to outbox_messages_archive) those
// that have outlived p. Pending rows are never touched. Each call is a few
// short statements walking the primary key; a row is never both archived
// and left in place, nor lost, even if ctx ends midway.
func (st *Store) Retain(ctx context.Context, after int64, limit int, p RetentionPolicy) (RetentionBatch, error) {
	return st.retain(ctx, retention[st.d], after, limit, p)
}

// partitionRetention holds the retention statements per partition.
var partitionRetention sync.Map

// RetainIn is Retain over one partition of a partitioned outbox_messages
// (PostgreSQL): DefaultPartition, or a day partition held back by pending
// rows. The rows it archives go to outbox_messages_archive.
func (st *Store) RetainIn(ctx context.Context, table string, after int64, limit int, p RetentionPolicy) (RetentionBatch, error) {
	if st.d != Postgres {
		return RetentionBatch{}, errors.New("retention: partitions are PostgreSQL only")
	}
	if err := checkPartition(table); err != nil {
		return RetentionBatch{}, fmt.Errorf("retention: %w", err)
	}
	s, ok := partitionRetention.Load(table)
	if !ok {
		s, _ = partitionRetention.LoadOrStore(table, buildRetentionOn(Postgres, quoteIdent(table)))
	}
	return st.retain(ctx, s.(retentionStatements), after, limit, p)
}

func (st *Store) retain(ctx context.Context, s retentionStatements, after int64, limit int, p RetentionPolicy) (RetentionBatch, error) {
	var b RetentionBatch
	young := min(p.Sent, p.Dead)
	rows, err := st.db.Query(ctx, s.window, p.Sent.Microseconds(), p.Dead.Microseconds(), young.Microseconds(), after, limit)
	if err != nil {
		return b, err
	}
	var due []int64
	var firstNotDue int64
	for rows.Next() {
		var id int64
		var isDue, isYoung int
		if err := rows.Scan(&id, &isDue, &isYoung); err != nil {
			rows.Close()
			return b, err
		}
		b.Scanned++
		b.LastID = id
		if isDue == 1 {
			due = append(due, id)
		} else if firstNotDue == 0 {
			firstNotDue = id
		}
		if isYoung == 1 && b.FirstYoung == 0 {
			b.FirstYoung = id
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return b, err
	}
	b.FirstKept = firstNotDue
	if len(due) == 0 {
		return b, nil
	}
	if hook, ok := beforeRemove.Load(st); ok {
		hook.(func())()
	}
	if p.Archive {
		b.Removed, err = st.archive(ctx, s, due, p)
	} else {
		b.Removed, err = st.db.Exec(ctx, s.remove, st.ids(due), p.Sent.Microseconds(), p.Dead.Microseconds())
	}
	if err != nil {
		return b, err
	}
	if b.Removed < int64(len(due)) && (b.FirstKept == 0 || due[0] < b.FirstKept) {
		// Some due row changed meanwhile (requeued, say) and stayed.
		b.FirstKept = due[0]
	}
	return b, nil
}

// archive moves the due rows among ids into the archive, atomically.
func (st *Store) archive(ctx context.Context, s retentionStatements, ids []int64, p RetentionPolicy) (int64, error) {
	sent, dead := p.Sent.Microseconds(), p.Dead.Microseconds()
	if st.d == Postgres {
		return st.db.Exec(ctx, s.move, ids, sent, dead)
	}
	var moved int64
	err := st.inTx(ctx, func(q Querier) error {
		var locked []int64
		var err error
		if st.d == MySQL {
			// Lock the due rows first: the copy and the delete then see
			// the same rows, whatever the clock says by then.
			locked, err = queryIDs(ctx, q, s.lock, st.ids(ids), sent, dead)
			if err != nil || len(locked) == 0 {
				return err
			}
			n, err := q.Exec(ctx, s.archive, st.ids(locked))
			if err != nil {
				return err
			}
			if n != int64(len(locked)) {
				return fmt.Errorf("archive: copied %d of %d locked rows", n, len(locked))
			}
		} else {
			locked, err = queryIDs(ctx, q, s.archive, st.ids(ids), sent, dead)
			if err != nil || len(locked) == 0 {
				return err
			}
		}
		n, err := q.Exec(ctx, s.purge, st.ids(locked))
		if err != nil {
			return err
		}
		if n != int64(len(locked)) {
			return fmt.Errorf("archive: deleted %d of %d archived rows", n, len(locked))
		}
		moved = n
		return nil
	})
	return moved, err
}

func queryIDs(ctx context.Context, q Querier, sql string, args ...any) ([]int64, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// inTx runs fn in a transaction on a connection of its own.
func (st *Store) inTx(ctx context.Context, fn func(Querier) error) error {
	if st.session == nil {
		return errors.New("retention: the store has no session to begin transactions on")
	}
	s, err := st.session(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.InTx(ctx, fn)
}
