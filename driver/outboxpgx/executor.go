package outboxpgx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/internal/pg"
)

// runner is what pgx pools, connections and transactions share.
type runner interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// executor is a driver.Executor over a pool, a connection or a transaction.
type executor struct{ r runner }

func (e executor) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := e.r.Exec(ctx, sql, args...)
	return tag.RowsAffected(), pg.Translate(err)
}

func (e executor) Query(ctx context.Context, sql string, args ...any) (driver.Rows, error) {
	r, err := e.r.Query(ctx, sql, args...)
	if err != nil {
		return nil, pg.Translate(err)
	}
	return rows{r}, nil
}

// rows translates the errors of pgx rows.
type rows struct{ pgx.Rows }

func (r rows) Scan(dest ...any) error { return pg.Translate(r.Rows.Scan(dest...)) }
func (r rows) Err() error             { return pg.Translate(r.Rows.Err()) }

// session is a connection acquired from the pool.
type session struct {
	executor
	c *pgxpool.Conn
}

func (s *session) InTx(ctx context.Context, fn func(driver.Executor) error) error {
	return pg.Translate(pgx.BeginFunc(ctx, s.c, func(tx pgx.Tx) error { return fn(executor{tx}) }))
}

func (s *session) Close() error { s.c.Release(); return nil }
