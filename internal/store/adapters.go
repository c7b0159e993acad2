package store

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgxRunner is what pgx pools, connections and transactions share.
type pgxRunner interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// PGX adapts a pgx pool, connection or transaction.
func PGX(r pgxRunner) Querier { return pgxQuerier{r} }

type pgxQuerier struct{ r pgxRunner }

func (q pgxQuerier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.r.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q pgxQuerier) Query(ctx context.Context, sql string, args ...any) (Rows, error) {
	rows, err := q.r.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// PGXSession takes a dedicated connection from pool.
func PGXSession(ctx context.Context, pool *pgxpool.Pool) (Session, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &pgxSession{pgxQuerier{c}, c}, nil
}

type pgxSession struct {
	pgxQuerier
	c *pgxpool.Conn
}

func (s *pgxSession) InTx(ctx context.Context, fn func(Querier) error) error {
	return pgx.BeginFunc(ctx, s.c, func(tx pgx.Tx) error { return fn(PGX(tx)) })
}

func (s *pgxSession) Close() error { s.c.Release(); return nil }

// sqlRunner is what *sql.DB, *sql.Conn and *sql.Tx share.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// SQL adapts a *sql.DB, *sql.Conn or *sql.Tx.
func SQL(r sqlRunner) Querier { return sqlQuerier{r} }

type sqlQuerier struct{ r sqlRunner }

func (q sqlQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.r.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := q.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// SQLSession takes a dedicated connection from db.
func SQLSession(ctx context.Context, db *sql.DB) (Session, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &sqlSession{sqlQuerier{c}, c}, nil
}

type sqlSession struct {
	sqlQuerier
	c *sql.Conn
}

func (s *sqlSession) InTx(ctx context.Context, fn func(Querier) error) error {
	tx, err := s.c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(SQL(tx)); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *sqlSession) Close() error { return s.c.Close() }
