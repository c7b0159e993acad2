package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox/internal/redact"
)

// Database health.
//
// A relay's statements fail now and then (a deadlock, a failover, a
// connection cut) and are retried: one failure says little. When they
// keep failing the relay delivers nothing, and Ready says so: after
// dbFailingAfter failures in a row of its rounds (reading a batch,
// settling one, the marks between) or of its lease upkeep (heartbeat,
// renewal, balance), until one of the same kind goes through. Every
// failure counts in outbox_database_errors_total by class. Sampling the
// table for the gauges counts there too, as class sample, but does not
// make the relay unready: its rounds may still go through.
const dbFailingAfter = 3

// Classes of outbox_database_errors_total: what the failed statement was
// for.
const (
	dbRead   = "read"   // reading a round's batch (with a carried settle, see carry.go)
	dbSettle = "settle" // recording a round's outcomes
	dbMark   = "mark"   // the other statements of a round: in-flight marks, a suspect's charge
	dbLease  = "lease"  // heartbeat, lease renewal and rebalancing
	dbSample = "sample" // sampling the table for the gauges and alerts
	dbOther  = "other"  // a round's failure of no class above
)

// dbError is a round's failure with the class of the statement that
// failed; its text is the wrapped error's.
type dbError struct {
	class string
	err   error
}

func (e *dbError) Error() string { return e.err.Error() }
func (e *dbError) Unwrap() error { return e.err }

// dbFailed returns err as the failure of a statement of class.
func dbFailed(class string, err error) error {
	return &dbError{class: class, err: err}
}

// dbClassOf is the class of a round's failure.
func dbClassOf(err error) string {
	var de *dbError
	if errors.As(err, &de) {
		return de.class
	}
	return dbOther
}

// dbHealth is the state behind Ready: the current streak of failures of
// the rounds and of the lease upkeep.
type dbHealth struct {
	mu            sync.Mutex
	rounds, lease dbStreak
	errors        *prometheus.CounterVec // nil without metrics
}

// dbStreak is a run of failures in a row.
type dbStreak struct {
	n     int
	since time.Time
	last  string // the last failure, one redacted line
}

func (s *dbStreak) record(err error, now time.Time) {
	if err == nil {
		*s = dbStreak{}
		return
	}
	if s.n == 0 {
		s.since = now
	}
	s.n++
	s.last = redact.Text(oneLine(err.Error()))
}

// dbRound records the outcome of a round (or of the settle written
// before a wait); failures after ctx ended are the shutdown's, not the
// database's.
func (r *Relay) dbRound(ctx context.Context, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	if err != nil {
		r.dbCount(dbClassOf(err))
	}
	r.db.mu.Lock()
	r.db.rounds.record(err, time.Now())
	r.db.mu.Unlock()
}

// dbLeaseUpkeep records the outcome of one pass of the lease loop.
func (r *Relay) dbLeaseUpkeep(ctx context.Context, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	if err != nil {
		r.dbCount(dbLease)
	}
	r.db.mu.Lock()
	r.db.lease.record(err, time.Now())
	r.db.mu.Unlock()
}

// dbCount adds one to outbox_database_errors_total{class}.
func (r *Relay) dbCount(class string) {
	if r.db.errors != nil {
		r.db.errors.WithLabelValues(class).Inc()
	}
}

// Ready reports whether the relay's work on its database goes through:
// nil, or an error saying what has failed dbFailingAfter times in a row
// or more, since when, and the last failure (which may name the database,
// its host and user: for operators, not for anonymous callers).
func (r *Relay) Ready() error {
	r.db.mu.Lock()
	defer r.db.mu.Unlock()
	for _, s := range []struct {
		what string
		st   dbStreak
	}{{"rounds", r.db.rounds}, {"lease renewals", r.db.lease}} {
		if s.st.n >= dbFailingAfter {
			return fmt.Errorf("database: %s failing, %d in a row for %s: %s", s.what, s.st.n, roundAge(time.Since(s.st.since)), s.st.last)
		}
	}
	return nil
}
