package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The snapshot read path (PostgreSQL): the relay reads what committed
// between two transaction snapshots, and writes nothing for a message it
// delivered. See migrations/postgres-snapshot/enable.sql for the schema
// and its two domains of rows.

// snapshotEnableFile is the idempotent schema step of the snapshot read.
const snapshotEnableFile = "migrations/postgres-snapshot/enable.sql"

// ErrSnapshotDialect: the snapshot read path is PostgreSQL's.
var ErrSnapshotDialect = errors.New("the snapshot read path needs PostgreSQL")

// SnapshotSQL is the schema step that enables the snapshot read path.
func SnapshotSQL() (string, error) {
	b, err := migrationFS.ReadFile(snapshotEnableFile)
	return string(b), err
}

// EnableSnapshotRead adds the snapshot read path's column, indexes,
// cursors and functions to a migrated PostgreSQL schema; running it again
// changes nothing.
func (st *Store) EnableSnapshotRead(ctx context.Context) error {
	if st.d != Postgres {
		return ErrSnapshotDialect
	}
	if p, err := st.Partitioned(ctx); err != nil || p {
		if err == nil {
			err = errors.New("the snapshot read does not support an outbox_messages partitioned by day")
		}
		return err
	}
	src, err := SnapshotSQL()
	if err != nil {
		return err
	}
	for _, stmt := range SplitStatements(src) {
		if _, err := st.db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("enabling the snapshot read: %w", err)
		}
	}
	return nil
}

// snapshotDisableFile drops what snapshotEnableFile added.
const snapshotDisableFile = "migrations/postgres-snapshot/disable.sql"

// DisableSnapshotRead turns the snapshot read off, for relays that read
// by status again: in one transaction, with no relay holding a lease
// (else an error naming them), it marks the delivered rows of the
// snapshot domain sent (sent_at now: when they went is not recorded) and
// drops the column, indexes, cursors, functions and trigger
// EnableSnapshotRead added. It returns how many rows it marked sent; on
// a database not read by snapshots it does nothing.
func (st *Store) DisableSnapshotRead(ctx context.Context) (int64, error) {
	if st.d != Postgres {
		return 0, ErrSnapshotDialect
	}
	if on, err := st.SnapshotReadEnabled(ctx); err != nil || !on {
		return 0, err
	}
	drops, err := migrationFS.ReadFile(snapshotDisableFile)
	if err != nil {
		return 0, err
	}
	var sent int64
	err = st.inTx(ctx, func(q Querier) error {
		// Held to the commit: no relay takes a lease meanwhile.
		if _, err := q.Exec(ctx, `LOCK TABLE outbox_leases IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		live, err := queryColumn[string](ctx, q, `SELECT DISTINCT owner FROM outbox_leases WHERE owner IS NOT NULL AND expires_at > now() ORDER BY 1`)
		if err != nil {
			return err
		}
		if len(live) > 0 {
			return fmt.Errorf("relays hold leases on the database (%s): stop every relay on it first (a killed relay's leases lapse after its lease TTL)", strings.Join(live, ", "))
		}
		if sent, err = q.Exec(ctx, `UPDATE outbox_messages SET status = 'sent', sent_at = now()
WHERE outbox_txid IS NOT NULL AND status = 'pending' AND outbox_delivered(partition_no, outbox_txid, id)`); err != nil {
			return err
		}
		for _, stmt := range SplitStatements(string(drops)) {
			if _, err := q.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("turning the snapshot read off: %w", err)
	}
	return sent, nil
}

// SnapshotStatus is the status column as the relays reading by snapshots
// see it: a pending row of the snapshot domain behind its partition's
// recorded cursor is sent.
const SnapshotStatus = "(CASE WHEN status = 'pending' AND outbox_delivered(partition_no, outbox_txid, id) THEN 'sent' ELSE status END)"

// WithSnapshotRead returns a store like st for a database whose
// snapshot read is enabled: its counts, ages and gauges take a pending
// row of the snapshot domain behind its partition's recorded cursor for
// sent (outbox_delivered), and retention removes such rows as it removes
// sent ones. The operator's reads and changes (List, Search, Get, the
// single and bulk actions) see and guard by that status too, and a
// replay of such a row moves it to the table domain so that it is read
// again.
func (st *Store) WithSnapshotRead() *Store {
	c := *st
	c.snapshot = true
	c.s.countByStatusTopic = `SELECT ` + SnapshotStatus + `, topic, count(*) FROM outbox_messages GROUP BY 1, 2 ORDER BY 1, 2`
	c.s.oldestPending = `SELECT extract(epoch from now() - min(o.at))::float8 FROM (` + snapshotFirst("created_at", "true") + `) AS o`
	c.s.oldestDue = `SELECT extract(epoch from now() - min(o.at))::float8 FROM (` + snapshotFirst("available_at", "m.available_at <= now()") + `) AS o`
	c.s.gauges = `SELECT
  (SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND outbox_txid IS NULL)
    + (SELECT count(*) FROM outbox_messages AS m WHERE m.outbox_txid >= outbox_snapshot_floor() AND m.status = 'pending'
         AND NOT outbox_delivered(m.partition_no, m.outbox_txid, m.id)),
  (SELECT count(*) FROM outbox_messages WHERE status = 'dead'),
  (` + c.s.oldestPending + `),
  (` + c.s.oldestDue + `),
  extract(epoch from now())::float8`
	c.ret = postgresRetentionOn("outbox_messages", true)
	return &c
}

// snapshotFirst selects, as at, the column col of the first pending row
// not yet delivered where cond (on m) holds: of the table domain by id, and of
// the snapshot domain after the cursors by transaction.
func snapshotFirst(col, cond string) string {
	return `(SELECT m.` + col + ` AS at FROM outbox_messages AS m WHERE m.status = 'pending' AND m.outbox_txid IS NULL AND ` + cond + ` ORDER BY m.id LIMIT 1)
UNION ALL
(SELECT m.` + col + ` FROM outbox_messages AS m WHERE m.outbox_txid >= outbox_snapshot_floor() AND m.status = 'pending' AND ` + cond + `
   AND NOT outbox_delivered(m.partition_no, m.outbox_txid, m.id) ORDER BY m.outbox_txid, m.id LIMIT 1)`
}

// SnapshotReadEnabled reports whether EnableSnapshotRead ran on the
// database.
func (st *Store) SnapshotReadEnabled(ctx context.Context) (bool, error) {
	if st.d != Postgres {
		return false, nil
	}
	n, err := queryInt(ctx, st.db, `SELECT count(*) FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = 'outbox_messages' AND column_name = 'outbox_txid'`)
	return n > 0, err
}

// SnapshotCursor is where the snapshot read of one partition stands:
// every row of the snapshot domain that Lo sees has been read, and of
// those Hi sees and Lo does not (the batch being paged, when Hi is set),
// every row up to (AfterTxid, AfterID) in transaction then id order.
// Snapshots are in pg_snapshot's text form; "" is none (Lo: from the
// start; Hi: none being paged). AfterTxid 0 is none.
type SnapshotCursor struct {
	Partition int
	Lo, Hi    string
	AfterTxid uint64
	AfterID   int64
	// Boot is when the server that took the snapshots started (see
	// outbox_server_boot): a cursor of another boot counts only up to its
	// xmin. 0: unknown.
	Boot int64
}

// sameBoot returns c as a read on a server that started at boot takes
// it: a cursor of another boot counts only up to its xmin, and the batch
// it was paging starts again (see outbox_snapshot_lo).
func (c SnapshotCursor) sameBoot(boot int64) SnapshotCursor {
	if c.Lo == "" || c.Boot == boot {
		return c
	}
	xmin, _, err := snapshotBounds(c.Lo)
	if err != nil {
		return c
	}
	x := strconv.FormatUint(xmin, 10)
	return SnapshotCursor{Partition: c.Partition, Lo: x + ":" + x + ":", Boot: boot}
}

// SnapshotPage is one read of the snapshot domain.
type SnapshotPage struct {
	// Rows are the rows to deliver, in transaction then id order, each
	// with Snapshot set.
	Rows []Row
	// Cursors are the read's cursors once Rows are settled, in the order
	// they were given.
	Cursors []SnapshotCursor
	// Read counts the rows of the page: Rows, and the rows moved to the
	// table domain.
	Read int
}

// snapshotReadSQL calls outbox_snapshot_read (see enable.sql).
const snapshotReadSQL = `SELECT * FROM outbox_snapshot_read($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bool[], $6::xid8, $7::xid8, $8, $9::bigint, $10::bigint[], $11::int[], $12, $13::xid8[])`

// SnapshotRead reads up to limit rows of the snapshot domain after
// cursors (one per partition to read), moving those that cannot be
// delivered now to the table domain, and returns them with the cursors
// that follow them. It records the cursors of the partitions keep on
// owner's leases, and commits durably unless the server's WAL is flushed
// past its snapshot already (see outbox_snapshot_read).
func (st *Store) SnapshotRead(ctx context.Context, owner string, cursors []SnapshotCursor, keep []int, limit int) (SnapshotPage, error) {
	if len(cursors) == 0 {
		return SnapshotPage{}, nil
	}
	n := 0
	for _, c := range cursors {
		n = max(n, c.Partition+1)
	}
	los, his, ats := make([]*string, n), make([]*string, n), make([]*string, n)
	ais, incl, boots := make([]*int64, n), make([]bool, n), make([]*int64, n)
	var loX, hiX uint64
	var xips []string
	for i, c := range cursors {
		p := c.Partition
		incl[p] = true
		if c.Boot != 0 {
			boots[p] = &cursors[i].Boot
		}
		var from uint64
		switch {
		case c.AfterTxid != 0:
			t := strconv.FormatUint(c.AfterTxid, 10)
			ats[p], ais[p] = &t, &cursors[i].AfterID
			from = c.AfterTxid
		case c.Lo != "":
			// Every row below its xmax that the cursor did not see is
			// one of its transactions in progress.
			_, x, err := snapshotBounds(c.Lo)
			if err != nil {
				return SnapshotPage{}, err
			}
			from = x
			if ip := strings.SplitN(c.Lo, ":", 3)[2]; ip != "" {
				xips = append(xips, strings.Split(ip, ",")...)
			}
		}
		if i == 0 || from < loX {
			loX = from
		}
		if c.Lo != "" {
			los[p] = &cursors[i].Lo
		}
		if c.Hi != "" {
			_, xmax, err := snapshotBounds(c.Hi)
			if err != nil {
				return SnapshotPage{}, err
			}
			his[p] = &cursors[i].Hi
			hiX = max(hiX, xmax)
		}
	}
	type read struct {
		row         Row
		txid        uint64
		held        bool
		txText, cur string
		boot        int64
	}
	var all []read
	_, err := st.retry(ctx, func() (int64, error) {
		var err error
		all, err = AppendRows(ctx, st.db, make([]read, 0, limit+1), func(scan func(...any) error) (read, error) {
			var txText, held, cur, boot string
			r, _, err := scanRow(scan, &txText, &held, &cur, &boot)
			if err != nil {
				return read{}, err
			}
			b, err := strconv.ParseInt(boot, 10, 64)
			return read{row: r, held: held == "true", txText: txText, cur: cur, boot: b}, err
		}, snapshotReadSQL, los, his, ats, ais, incl, strconv.FormatUint(loX, 10), strconv.FormatUint(hiX, 10), limit, st.ReadBound(), boots,
			st.dl.intList(keep), owner, xips)
		return int64(len(all)), err
	})
	if err != nil {
		return SnapshotPage{}, err
	}
	// The snapshot the read took comes in every row, and in a row of id
	// 0 that is always there.
	if len(all) == 0 || all[0].cur == "" {
		return SnapshotPage{}, errors.New("store: the snapshot read returned no snapshot")
	}
	cur, boot := all[0].cur, all[0].boot
	all = slices.DeleteFunc(all, func(r read) bool { return r.row.ID == 0 })
	for i := range all {
		t, err := strconv.ParseUint(all[i].txText, 10, 64)
		if err != nil {
			return SnapshotPage{}, fmt.Errorf("store: transaction id %q: %w", all[i].txText, err)
		}
		all[i].txid = t
	}
	slices.SortFunc(all, func(a, b read) int {
		return cmp.Or(cmp.Compare(a.txid, b.txid), cmp.Compare(a.row.ID, b.row.ID))
	})
	page := SnapshotPage{Read: len(all), Cursors: make([]SnapshotCursor, len(cursors))}
	for _, r := range all {
		if !r.held {
			r.row.Snapshot = true
			page.Rows = append(page.Rows, r.row)
		}
	}
	for i, c := range cursors {
		c = c.sameBoot(boot)
		hi := cmp.Or(c.Hi, cur)
		if len(all) < limit {
			// The batch is read to its end.
			page.Cursors[i] = SnapshotCursor{Partition: c.Partition, Lo: hi, Boot: boot}
			continue
		}
		// A full page holds every row of the batch up to its last one,
		// whatever its partition.
		last := all[len(all)-1]
		page.Cursors[i] = SnapshotCursor{Partition: c.Partition, Lo: c.Lo, Hi: hi, AfterTxid: last.txid, AfterID: last.row.ID, Boot: boot}
	}
	return page, nil
}

// snapshotBounds returns the xmin and xmax of a snapshot in text form
// ("xmin:xmax:xip,…").
func snapshotBounds(s string) (xmin, xmax uint64, err error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return 0, 0, fmt.Errorf("store: not a snapshot: %q", s)
	}
	if xmin, err = strconv.ParseUint(parts[0], 10, 64); err == nil {
		xmax, err = strconv.ParseUint(parts[1], 10, 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("store: not a snapshot: %q", s)
	}
	return xmin, xmax, nil
}

// snapshotResumeSQL calls outbox_snapshot_resume (see enable.sql).
const snapshotResumeSQL = `SELECT * FROM outbox_snapshot_resume($1::int[], $2::bool[], $3, $4)`

// SnapshotResume returns owner's cursors of parts, the partitions it has
// just taken. A partition whose previous owner stopped without handing it
// over (spill[i] for parts[i]) first has the rows that owner may have been
// publishing (the first limit after its recorded cursor) moved to the
// table domain, and its in-flight mark raised to the highest of their
// ids: the caller reads them as suspects. It returns each partition's
// in-flight mark too. Partitions owner does not hold are left out.
func (st *Store) SnapshotResume(ctx context.Context, owner string, parts []int, spill []bool, limit int) ([]SnapshotCursor, []int64, error) {
	if len(parts) != len(spill) {
		return nil, nil, errors.New("store: SnapshotResume: parts and spill differ in length")
	}
	var marks []int64
	var cursors []SnapshotCursor
	_, err := st.retry(ctx, func() (int64, error) {
		marks = nil
		var err error
		cursors, err = AppendRows(ctx, st.db, nil, func(scan func(...any) error) (SnapshotCursor, error) {
			var c SnapshotCursor
			var lo, hi, at *string
			var ai, boot *int64
			var mark int64
			if err := scan(&c.Partition, &lo, &hi, &at, &ai, &mark, &boot); err != nil {
				return c, err
			}
			if boot != nil {
				c.Boot = *boot
			}
			if lo != nil {
				c.Lo = *lo
			}
			if hi != nil {
				c.Hi = *hi
			}
			if at != nil && ai != nil {
				t, err := strconv.ParseUint(*at, 10, 64)
				if err != nil {
					return c, fmt.Errorf("store: transaction id %q: %w", *at, err)
				}
				c.AfterTxid, c.AfterID = t, *ai
			}
			marks = append(marks, mark)
			return c, nil
		}, snapshotResumeSQL, st.dl.intList(parts), spill, owner, limit)
		return int64(len(cursors)), err
	})
	return cursors, marks, err
}

// saveCursorsSQL writes owner's cursors on its unexpired leases, locking
// the rows in partition order as the renewal does.
const saveCursorsSQL = `WITH u AS (
    SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::bigint[], $7::bigint[]) AS u(p, lo, hi, at, ai, boot)
), locked AS MATERIALIZED (
    SELECT l.partition_no AS p FROM outbox_leases AS l JOIN u ON u.p = l.partition_no
    WHERE l.owner = $6 AND l.expires_at > now()
    ORDER BY l.partition_no
    FOR UPDATE OF l
)
UPDATE outbox_leases AS l SET snap_lo = u.lo::pg_snapshot, snap_hi = u.hi::pg_snapshot,
    snap_after_txid = u.at::xid8, snap_after_id = u.ai, snap_boot = u.boot
FROM u JOIN locked ON locked.p = u.p
WHERE l.partition_no = u.p`

// SaveSnapshotCursors records owner's cursors on the leases it still
// holds, for the relay that holds them next.
func (st *Store) SaveSnapshotCursors(ctx context.Context, owner string, cursors []SnapshotCursor) error {
	if len(cursors) == 0 {
		return nil
	}
	n := len(cursors)
	ps, los, his, ats, ais := make([]int32, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*int64, n)
	boots := make([]*int64, n)
	for i, c := range cursors {
		ps[i] = int32(c.Partition)
		if c.Boot != 0 {
			boots[i] = &cursors[i].Boot
		}
		if c.Lo != "" {
			los[i] = &cursors[i].Lo
		}
		if c.Hi != "" {
			his[i] = &cursors[i].Hi
		}
		if c.AfterTxid != 0 {
			t := strconv.FormatUint(c.AfterTxid, 10)
			ats[i], ais[i] = &t, &cursors[i].AfterID
		}
	}
	_, err := st.ExecRetry(ctx, saveCursorsSQL, ps, los, his, ats, ais, owner, boots)
	return err
}

// readRetriesSQL calls outbox_read_retries with read's arguments.
const readRetriesSQL = `SELECT * FROM outbox_read_retries($2::int[], $3, $4, $1::bigint)`

// ReadRetries is ReadMark over the table domain of a database read by
// snapshots: retries, held-back and delayed rows, suspects.
func (st *Store) ReadRetries(ctx context.Context, owner string, parts []int, limit int) ([]Row, error) {
	if st.d != Postgres {
		return nil, ErrSnapshotDialect
	}
	var rows []Row
	_, err := st.retry(ctx, func() (int64, error) {
		var err error
		rows, err = st.read(ctx, readRetriesSQL, st.dl.intList(parts), limit, owner)
		return int64(len(rows)), err
	})
	return rows, err
}

// settleSnapshotSQL calls outbox_settle_snapshot.
const settleSnapshotSQL = `SELECT outbox_settle_snapshot($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::bool[], $7)`

// SettleSnapshot is Settle on a database read by snapshots: each row it
// writes moves to the table domain. Outcomes of delivered rows of the
// snapshot domain are the caller's to leave out.
func (st *Store) SettleSnapshot(ctx context.Context, owner string, outs []Outcome) (int64, error) {
	if len(outs) == 0 {
		return 0, nil
	}
	return st.retry(ctx, func() (int64, error) { return st.dl.settle(ctx, st.db, settleSnapshotSQL, owner, outs) })
}

// expireTableSQL is the expiry of a database read by snapshots: the
// table domain only. A row of the snapshot domain whose expires_at has
// come moves to the table domain when the snapshot read reaches it.
var expireTableSQL = postgresExpire(" AND m.outbox_txid IS NULL")

// ExpireTable is Expire on a database read by snapshots.
func (st *Store) ExpireTable(ctx context.Context, owner string) (int64, error) {
	if st.d != Postgres {
		return 0, ErrSnapshotDialect
	}
	return st.ExecRetry(ctx, expireTableSQL, owner)
}
