package store

import (
	"context"
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
	// (available_at, or created_at when that is later); expired rows go
	// this long after they expired (the expiry sets available_at).
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

// Retain looks at up to limit rows after id after, in id order, and
// deletes (or, with p.Archive, moves to outbox_messages_archive) those
// that have outlived p. Pending rows are never touched. Each call is a few
// short statements walking the primary key; a row is never both archived
// and left in place, nor lost, even if ctx ends midway.
func (st *Store) Retain(ctx context.Context, after int64, limit int, p RetentionPolicy) (RetentionBatch, error) {
	return st.retain(ctx, st.ret, after, limit, p)
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
		s, _ = partitionRetention.LoadOrStore(table, postgresRetentionOn(quoteIdent(table), false))
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
		b.Removed, err = st.retry(ctx, func() (int64, error) {
			return st.dl.archive(ctx, st, s, due, p.Sent.Microseconds(), p.Dead.Microseconds())
		})
	} else {
		b.Removed, err = st.ExecRetry(ctx, s.remove, st.dl.idList(due), p.Sent.Microseconds(), p.Dead.Microseconds())
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

// purgeArchived deletes the rows archived (MySQL, SQLite) and checks it
// deleted them all.
// archiveInTx archives the due rows among ids in one transaction: claim
// (with the ids and the sent and dead retentions in microseconds) returns
// the ids of the rows it took, copySQL (unless empty: claim copied them)
// copies those rows to the archive, and they are then deleted.
func archiveInTx(ctx context.Context, st *Store, s retentionStatements, claim, copySQL string, ids []int64, sent, dead int64) (int64, error) {
	var moved int64
	err := st.inTx(ctx, func(q Querier) error {
		taken, err := queryColumn[int64](ctx, q, claim, jsonList(ids), sent, dead)
		if err != nil || len(taken) == 0 {
			return err
		}
		if copySQL != "" {
			n, err := q.Exec(ctx, copySQL, jsonList(taken))
			if err != nil {
				return err
			}
			if n != int64(len(taken)) {
				return fmt.Errorf("archive: copied %d of %d locked rows", n, len(taken))
			}
		}
		moved, err = purgeArchived(ctx, q, s, taken)
		return err
	})
	return moved, err
}

func purgeArchived(ctx context.Context, q Querier, s retentionStatements, archived []int64) (int64, error) {
	n, err := q.Exec(ctx, s.purge, jsonList(archived))
	if err != nil {
		return 0, err
	}
	if n != int64(len(archived)) {
		return 0, fmt.Errorf("archive: deleted %d of %d archived rows", n, len(archived))
	}
	return n, nil
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
