package relay

import (
	"context"
	"strconv"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// A retry budget bounds a message's retrying by its age as well as by its
// max_attempts, whichever comes first: a message whose charged failure
// finds it older than the budget, or whose next retry would fall past it,
// goes dead then with "retry budget (D) spent after N attempts: <error>".
// Age is measured from the row's created_at by the database's clock (the
// relay's estimate of it, dbClock); a row whose created_at is unknown (an
// adopted table without one, or a value that cannot be its write time) is
// bounded by its attempts only. Only charged failures spend it: a message
// held back by a route that is down is not retried, and is sent if its
// next attempt goes through however old it is.

// retryBudget is the route's retry budget by age: its own, else the
// relay's; 0 is none.
func (r *Relay) retryBudget(rs *routeState) time.Duration {
	if rs != nil && rs.MaxRetryAge > 0 {
		return rs.MaxRetryAge
	}
	return r.cfg.MaxRetryAge
}

// budgetSpent is the dead outcome of a failure of row whose next attempt
// would come after delay, when that attempt falls past the route's retry
// budget; ok is false while the budget lasts (or there is none).
func (r *Relay) budgetSpent(rs *routeState, row *store.Row, attempt int, delay time.Duration, msg string) (out store.Outcome, ok bool) {
	budget := r.retryBudget(rs)
	if budget <= 0 || row.CreatedAt.IsZero() {
		return out, false
	}
	age := r.clock.at(time.Now()).Sub(row.CreatedAt)
	if age+delay <= budget {
		return out, false
	}
	attempts := strconv.Itoa(attempt) + " attempts"
	if attempt == 1 {
		attempts = "1 attempt"
	}
	return store.Outcome{ID: row.ID, Status: store.StatusDead, CountAttempt: true,
		Error: "retry budget (" + budget.String() + ") spent after " + attempts + ": " + msg}, true
}

// RetryHorizon is how long a message of a route may keep being retried
// before it goes dead: the policy's Horizon over maxAttempts, bounded by
// the retry budget by age when there is one (0: none). Consumers keep
// their dedupe records at least this long.
func RetryHorizon(p RetryPolicy, maxAttempts int, maxAge time.Duration) time.Duration {
	h := p.Horizon(maxAttempts)
	if maxAge > 0 {
		return min(h, maxAge)
	}
	return h
}

// horizonAttempts is the max_attempts the horizons logged at start are
// computed for: the column's default (a message may set its own).
const horizonAttempts = 10

// startBudgets samples the database's clock when a route has a retry
// budget by age and the metrics sampler has not (ages are measured by the
// database's clock, not the host's), and logs the routes' horizons.
func (r *Relay) startBudgets(ctx context.Context) {
	budgeted := r.cfg.MaxRetryAge > 0
	for _, rs := range r.router.routes {
		budgeted = budgeted || rs.MaxRetryAge > 0
	}
	if n, ok := r.store.(interface {
		Now(context.Context) (time.Time, error)
	}); ok && budgeted && r.clock.sample.Load() == nil {
		start := time.Now()
		if now, err := n.Now(ctx); err == nil {
			r.clock.set(now, start, time.Now())
		}
	}
	r.logHorizons()
}

// logHorizons logs, once at start, each route's retry horizon for the
// default max_attempts against its retry budget by age, so that an
// operator can hold it against the consumers' dedupe window
// (docs/consumers.md): `outbox status` reads only the database and does
// not know the relays' routes.
func (r *Relay) logHorizons() {
	for _, rs := range r.router.routes {
		policy := r.cfg.Retry
		if rs.Retry != nil {
			policy = *rs.Retry
		}
		budget := r.retryBudget(rs)
		args := []any{"relay", r.id, "route", rs.name,
			"max_attempts", horizonAttempts,
			"attempts_horizon", policy.Horizon(horizonAttempts).String(),
			"attempts_min_horizon", policy.MinHorizon(horizonAttempts).String(),
			"max_retry_age", "none",
			"horizon", RetryHorizon(policy, horizonAttempts, budget).String()}
		if budget > 0 {
			args[11] = budget.String()
		}
		r.log.Info("outbox relay: retry horizon", args...)
	}
}
