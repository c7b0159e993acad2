package store

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Leases: the partitions a relay owns (outbox_leases), taken, renewed
// and given up, and the in-flight mark a new owner reads before it
// publishes.

// Partitions is the number of partitions (lease rows).
func (st *Store) Partitions(ctx context.Context) (int, error) {
	return queryInt(ctx, st.db, st.s.partitions)
}

// Acquire takes the free or expired partitions among parts for owner and
// returns every partition owner holds afterwards.
func (st *Store) Acquire(ctx context.Context, owner string, parts []int, ttl time.Duration) ([]Lease, error) {
	if len(parts) > 0 {
		if _, err := st.ExecRetry(ctx, st.s.acquire, owner, ttl.Microseconds(), st.dl.intList(parts), owner); err != nil {
			return nil, err
		}
	}
	return st.Held(ctx, owner)
}

// Held returns the partitions owner holds.
func (st *Store) Held(ctx context.Context, owner string) ([]Lease, error) {
	return AppendRows(ctx, st.db, nil, func(scan func(...any) error) (Lease, error) {
		var l Lease
		var prev string
		err := scan(&l.Partition, &l.InflightMaxID, &prev)
		l.Taken = prev != "" && prev != owner
		l.Unclean = prev != ""
		return l, err
	}, st.s.held, owner)
}

// Renew extends owner's unexpired leases by ttl and returns how many.
func (st *Store) Renew(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	return st.ExecRetry(ctx, st.s.renew, ttl.Microseconds(), owner)
}

// Release gives up owner's leases on parts.
func (st *Store) Release(ctx context.Context, owner string, parts []int) error {
	if len(parts) == 0 {
		return nil
	}
	_, err := st.ExecRetry(ctx, st.s.release, owner, st.dl.intList(parts))
	return err
}

// SuspectsLeft returns the partitions of marks (partition → in-flight
// mark a relay took over) that still hold a pending row at or below
// their mark: a suspect of the takeover, not yet settled (on a database
// read by snapshots, a row of the table domain). A partition it leaves
// out has none left.
func (st *Store) SuspectsLeft(ctx context.Context, marks map[int]int64) ([]int, error) {
	var left []int
	for p, mark := range marks {
		c := &cond{dl: st.dl}
		c.add("status = 'pending'")
		c.add("partition_no = {}", p)
		c.add("id <= {}", mark)
		if st.snapshot {
			c.add("outbox_txid IS NULL")
		}
		n, err := queryInt(ctx, st.db, "SELECT count(*) FROM (SELECT 1 FROM outbox_messages WHERE "+c.sql()+" LIMIT 1) AS s", c.args...)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			left = append(left, p)
		}
	}
	slices.Sort(left)
	return left, nil
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
	_, err = st.ExecRetry(ctx, st.s.markInflight, args...)
	return err
}
