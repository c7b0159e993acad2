package outboxsql

import (
	"context"
	"database/sql"

	"github.com/txoutbox/outbox/driver"
)

// executor is a driver.Executor over a *sql.DB, *sql.Conn or *sql.Tx whose
// errors pass through its dialect's translate.
type executor struct {
	r         Conn
	translate func(error) error
}

func (e executor) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := e.r.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, e.translate(err)
	}
	return res.RowsAffected()
}

func (e executor) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	r, err := e.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, e.translate(err)
	}
	return rows{r, e.translate}, nil
}

// poolExecutor is the executor on the *sql.DB that runs statements
// prepared by stmts, and unprepared when they cannot be.
type poolExecutor struct {
	executor
	stmts *stmtCache
}

func (e poolExecutor) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	s := e.stmts.get(ctx, query)
	if s == nil {
		return e.executor.Exec(ctx, query, args...)
	}
	res, err := s.ExecContext(ctx, args...)
	if err != nil {
		return 0, e.translate(err)
	}
	return res.RowsAffected()
}

func (e poolExecutor) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	s := e.stmts.get(ctx, query)
	if s == nil {
		return e.executor.Query(ctx, query, args...)
	}
	r, err := s.QueryContext(ctx, args...)
	if err != nil {
		return nil, e.translate(err)
	}
	return rows{r, e.translate}, nil
}

type rows struct {
	*sql.Rows
	translate func(error) error
}

func (r rows) Scan(dest ...any) error { return r.translate(r.Rows.Scan(dest...)) }
func (r rows) Err() error             { return r.translate(r.Rows.Err()) }
func (r rows) Close()                 { _ = r.Rows.Close() }

// session is one connection of the *sql.DB.
type session struct {
	executor
	c *sql.Conn
}

func (s *session) InTx(ctx context.Context, fn func(driver.Executor) error) error {
	tx, err := s.c.BeginTx(ctx, nil)
	if err != nil {
		return s.translate(err)
	}
	if err := fn(executor{tx, s.translate}); err != nil {
		_ = tx.Rollback()
		return s.translate(err)
	}
	return s.translate(tx.Commit())
}

func (s *session) Close() error { return s.c.Close() }
