package store

import (
	"context"
	"errors"
	"time"

	"github.com/txoutbox/outbox/driver"
)

// How statements run: deadlocks retried, rows appended, the database
// clock.

// retryAttempts is how many times retry runs a write that keeps being
// chosen as a deadlock victim.
const retryAttempts = 5

// retry runs fn, a write on the store's pool that the database may choose
// as a deadlock victim (MySQL locks index ranges; relays settle, acquire
// and release concurrently), again while it fails as one, up to
// retryAttempts times with a short growing pause. It is the store's one
// retry layer: every such write goes through it once, and nothing retries
// inside it. A write through a caller's transaction (Insert, InboxClaim)
// never does: the deadlock rolled back the caller's whole transaction,
// which only the caller can run again. When the attempts run out, the
// error is marked for Retried.
func (st *Store) retry(ctx context.Context, fn func() (int64, error)) (int64, error) {
	for attempt := 1; ; attempt++ {
		n, err := fn()
		if err == nil || !isDeadlock(err) {
			return n, err
		}
		if attempt == retryAttempts {
			return n, &retriedError{err: err}
		}
		select {
		case <-ctx.Done():
			return n, err
		case <-time.After(time.Duration(5<<(attempt-1)) * time.Millisecond):
		}
	}
}

// ExecRetry runs one statement on the store's pool through retry (a
// deadlock victim runs again) and reports how many rows it changed: every
// write of the relay's own statements, and of those package adoptstore
// builds over an adopted table, goes through it.
func (st *Store) ExecRetry(ctx context.Context, sql string, args ...any) (int64, error) {
	return st.retry(ctx, func() (int64, error) { return st.db.Exec(ctx, sql, args...) })
}

// retriedError is a deadlock retry gave up on.
type retriedError struct{ err error }

func (e *retriedError) Error() string { return e.err.Error() }

func (e *retriedError) Unwrap() error { return e.err }

// Retried reports whether err is a deadlock the store has already retried
// as often as it does: a caller's own retry loop (one for lost
// connections, say) should not run the call again for it.
func Retried(err error) bool {
	var r *retriedError
	return errors.As(err, &r)
}

// isDeadlock reports an error the driver marked as a deadlock or
// serialization failure.
func isDeadlock(err error) bool { return errors.Is(err, driver.ErrDeadlock) }

// isUniqueViolation reports an error the driver marked as a unique-key
// violation.
func isUniqueViolation(err error) bool { return errors.Is(err, driver.ErrUniqueViolation) }

// queryColumn runs a query of one column and returns its values in row
// order.
func queryColumn[T any](ctx context.Context, q Querier, sql string, args ...any) ([]T, error) {
	return AppendRows(ctx, q, nil, func(scan func(...any) error) (T, error) {
		var v T
		err := scan(&v)
		return v, err
	}, sql, args...)
}

// AppendRows runs a query through q and appends to dst each of its rows
// as scanRow reads it with scan: the store's one reader of rows, which
// package adoptstore's reads of an adopted table share.
func AppendRows[T any](ctx context.Context, q Querier, dst []T, scanRow func(scan func(...any) error) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scanRow(rows.Scan)
		if err != nil {
			return nil, err
		}
		dst = append(dst, v)
	}
	return dst, rows.Err()
}

// Now is the database's clock.
func (st *Store) Now(ctx context.Context) (time.Time, error) {
	rows, err := st.db.Query(ctx, st.s.now)
	if err != nil {
		return time.Time{}, err
	}
	defer rows.Close()
	var f float64
	if rows.Next() {
		if err := rows.Scan(&f); err != nil {
			return time.Time{}, err
		}
	}
	return FromEpoch(f), rows.Err()
}
