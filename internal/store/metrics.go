package store

import (
	"context"
	"time"
)

// GaugeSample is what the relay's periodic sample of the table found.
type GaugeSample struct {
	// Pending and Dead count rows in those statuses.
	Pending, Dead int64
	// OldestPendingAge is the age of the pending row with the lowest id
	// (0 when there is none), by the database clock, counted from its
	// created_at: a delayed message or a requeued old dead letter counts
	// from when it was enqueued.
	OldestPendingAge time.Duration
	// OldestDueAge is how long the pending row that fell due first has
	// been due (now - available_at; 0 when none is due): the time the
	// oldest deliverable message has been waiting for a relay. A delayed
	// message counts from its delivery time, a retry from its next
	// attempt, a requeued message from its requeue.
	OldestDueAge time.Duration
	// Now is the database clock when it was taken.
	Now time.Time
}

// Gauges samples pending and dead counts, the oldest pending and oldest
// due messages' ages and the database clock with one cheap statement (no sent row is
// read).
func (st *Store) Gauges(ctx context.Context) (GaugeSample, error) {
	var g GaugeSample
	rows, err := st.db.Query(ctx, st.s.gauges)
	if err != nil {
		return g, err
	}
	defer rows.Close()
	if rows.Next() {
		var pending, dead int64
		var age, due *float64
		var now float64
		if err := rows.Scan(&pending, &dead, &age, &due, &now); err != nil {
			return g, err
		}
		g.Pending, g.Dead, g.Now = pending, dead, FromEpoch(now)
		g.OldestPendingAge, g.OldestDueAge = Seconds(age), Seconds(due)
	}
	return g, rows.Err()
}

// Seconds is a sampled age in seconds as a duration: 0 for NULL (no such
// row) and for a negative age (clock rounding).
func Seconds(age *float64) time.Duration {
	if age == nil {
		return 0
	}
	return time.Duration(max(*age, 0) * float64(time.Second))
}
