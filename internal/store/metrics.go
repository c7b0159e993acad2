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
	// (0 when there is none), by the database clock.
	OldestPendingAge time.Duration
	// Now is the database clock when it was taken.
	Now time.Time
}

// Gauges samples pending and dead counts, the oldest pending message's
// age and the database clock with one cheap statement (no sent row is
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
		var age *float64
		var now float64
		if err := rows.Scan(&pending, &dead, &age, &now); err != nil {
			return g, err
		}
		g.Pending, g.Dead, g.Now = pending, dead, fromEpoch(now)
		if age != nil {
			g.OldestPendingAge = time.Duration(max(*age, 0) * float64(time.Second))
		}
	}
	return g, rows.Err()
}
