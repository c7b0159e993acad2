package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// A partitioned outbox_messages (PostgreSQL, `outbox migrate --partitioned`)
// is partitioned by range of message_id, one partition per UTC day of
// version 7 UUIDs (outbox_messages_pYYYYMMDD), plus outbox_messages_default
// for every other id. Retention drops a day once every row in it is due,
// and deletes rows one by one only in the default partition and in days
// held back by pending rows. The functions called here are created by the
// partitioned migration 1.

// DefaultPartition is the partition of the message ids no day covers.
const DefaultPartition = "outbox_messages_default"

// partitionLockTimeout bounds how long creating, detaching or dropping a
// partition waits for its locks: those statements lock outbox_messages,
// and while they wait, producers and relays queue behind them. On a
// timeout the janitor tries again at its next sweep.
const partitionLockTimeout = 500 * time.Millisecond

// dayPartition matches the name of a day partition.
var dayPartition = regexp.MustCompile(`^outbox_messages_p([0-9]{8})$`)

// DayPartition is one day partition of a partitioned outbox_messages.
type DayPartition struct {
	// Name is the partition's table name, outbox_messages_pYYYYMMDD.
	Name string
	// Day is the UTC day whose message ids it holds, at midnight UTC.
	Day time.Time
}

// End is when the partition's day ends: no message id in it is later.
func (p DayPartition) End() time.Time { return p.Day.AddDate(0, 0, 1) }

// PartitionState is what a day partition holds, for retention.
type PartitionState struct {
	// Rows is how many rows it holds.
	Rows int64
	// Pending is how many of them are pending (never due).
	Pending int64
	// DueIn is how long until its last settled row is due (database
	// time), zero or negative when all are: the partition can go when it
	// holds no pending row and DueIn is not positive.
	DueIn time.Duration
}

// partitioned reports whether outbox_messages is a partitioned table.
func partitioned(ctx context.Context, q Querier) (bool, error) {
	n, err := queryInt(ctx, q, `SELECT count(*) FROM pg_partitioned_table WHERE partrelid = to_regclass('outbox_messages')`)
	if err != nil {
		return false, fmt.Errorf("look up outbox_messages in pg_partitioned_table: %w", err)
	}
	return n > 0, nil
}

// Partitioned reports whether outbox_messages is partitioned, from the
// catalog; always false except on PostgreSQL.
func (st *Store) Partitioned(ctx context.Context) (bool, error) {
	if st.d != Postgres {
		return false, nil
	}
	return partitioned(ctx, st.db)
}

// DayPartitions lists the day partitions of outbox_messages, oldest
// first. Partitions named otherwise (the default one, any an operator
// attached) are left out.
func (st *Store) DayPartitions(ctx context.Context) ([]DayPartition, error) {
	names, err := queryColumn[string](ctx, st.db, `SELECT c.relname::text FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass('outbox_messages') ORDER BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	var out []DayPartition
	for _, name := range names {
		m := dayPartition.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		day, err := time.Parse("20060102", m[1])
		if err != nil {
			continue
		}
		out = append(out, DayPartition{Name: name, Day: day})
	}
	return out, nil
}

// AddPartitions creates the missing day partitions from `from` to `to`
// days after today (UTC, database time; negative for past days) and
// returns how many it created. A day that already has rows in the default
// partition stays there.
func (st *Store) AddPartitions(ctx context.Context, from, to int) (int, error) {
	if st.d != Postgres {
		return 0, errors.New("partitions: PostgreSQL only")
	}
	n, err := queryInt(ctx, st.db, `SELECT outbox_messages_add_partitions((now() AT TIME ZONE 'UTC')::date + $1::int, (now() AT TIME ZONE 'UTC')::date + $2::int, $3::int)`,
		from, to, partitionLockTimeout.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("create partitions: %w", err)
	}
	return n, nil
}

// checkPartition refuses a table name that is not one of the partitions
// retention works on; names are spliced into statements only after this.
func checkPartition(name string) error {
	if name == DefaultPartition || dayPartition.MatchString(name) {
		return nil
	}
	return fmt.Errorf("%q is not a partition of outbox_messages", name)
}

// quoteIdent quotes a checked table name.
func quoteIdent(name string) string { return `"` + name + `"` }

// PartitionState reads what a day partition holds under p: one scan of
// the partition, so the caller remembers DueIn rather than asking again.
func (st *Store) PartitionState(ctx context.Context, name string, p RetentionPolicy) (PartitionState, error) {
	var s PartitionState
	if err := checkPartition(name); err != nil {
		return s, err
	}
	rows, err := st.db.Query(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'pending'),
       extract(epoch FROM max(CASE WHEN status IN ('dead', 'expired')
                                   THEN greatest(created_at, available_at) + $2::bigint * interval '1 microsecond'
                                   ELSE coalesce(sent_at, created_at) + $1::bigint * interval '1 microsecond' END)
                          FILTER (WHERE status <> 'pending') - now())::float8
FROM `+quoteIdent(name), p.Sent.Microseconds(), p.Dead.Microseconds())
	if err != nil {
		return s, fmt.Errorf("read partition %s: %w", name, err)
	}
	defer rows.Close()
	var due *float64
	if rows.Next() {
		if err := rows.Scan(&s.Rows, &s.Pending, &due); err != nil {
			return s, err
		}
	}
	if due != nil {
		s.DueIn = time.Duration(*due * float64(time.Second))
		if s.DueIn == 0 {
			// Due means strictly past: a row due this very instant is not yet.
			s.DueIn = time.Microsecond
		}
	}
	return s, rows.Err()
}

// ArchiveName is the table a day partition is kept as when retention
// archives: outbox_messages_archive_YYYYMMDD.
func ArchiveName(p DayPartition) string {
	return "outbox_messages_archive_" + p.Day.Format("20060102")
}

// DropPartition detaches a day partition and drops it, or with archive
// keeps it as the plain table ArchiveName(p). It reports false, changing
// nothing, when the partition holds a pending row: the caller has checked
// with PartitionState that every other row is due, and only a requeue (or
// a new row) makes a due row pending again. The check and the detach are
// one transaction holding the partition's lock.
func (st *Store) DropPartition(ctx context.Context, p DayPartition, archive bool) (bool, error) {
	if err := checkPartition(p.Name); err != nil || p.Name == DefaultPartition {
		return false, fmt.Errorf("drop partition: %q is not a day partition", p.Name)
	}
	var keepAs any
	if archive {
		keepAs = ArchiveName(p)
	}
	rows, err := st.db.Query(ctx, `SELECT outbox_messages_drop_partition($1::text, $2::text, $3::int)`, p.Name, keepAs, partitionLockTimeout.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	defer rows.Close()
	var done bool
	if rows.Next() {
		if err := rows.Scan(&done); err != nil {
			return false, err
		}
	}
	return done, rows.Err()
}
