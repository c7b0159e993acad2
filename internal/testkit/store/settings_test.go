package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestServerAdvice: on PostgreSQL the relay is told when outbox_messages
// is not vacuumed automatically and when its connections JIT-compile; the
// other databases have nothing to say.
func TestServerAdvice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t, store.Postgres)
	poolWith := func(jit string) *store.Store {
		cfg, err := pgxpool.ParseConfig(db.URL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["jit"] = jit
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		drv, err := outboxpgx.New(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		return store.NewBackend(drv).Store
	}
	has := func(advice []string, what string) bool {
		for _, a := range advice {
			if strings.HasPrefix(a, what) {
				return true
			}
		}
		return false
	}

	db.Exec(t, "ALTER TABLE outbox_messages SET (autovacuum_enabled = false)")
	advice, err := poolWith("on").ServerAdvice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !has(advice, "autovacuum is off") || !has(advice, "jit is on") {
		t.Errorf("advice with autovacuum off for the table and jit on: %q", advice)
	}
	db.Exec(t, "ALTER TABLE outbox_messages RESET (autovacuum_enabled)")
	advice, err = poolWith("off").ServerAdvice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if has(advice, "jit is on") {
		t.Errorf("jit advice on a jit=off connection: %q", advice)
	}
	var serverOff bool
	if err := db.Pool.QueryRow(ctx, "SELECT current_setting('autovacuum') = 'off'").Scan(&serverOff); err != nil {
		t.Fatal(err)
	}
	if has(advice, "autovacuum is off") != serverOff {
		t.Errorf("autovacuum advice %q with the server's autovacuum off = %v", advice, serverOff)
	}

	for _, d := range []store.Dialect{store.MySQL, store.SQLite} {
		other := testdb.New(t, d)
		if advice, err := other.Store().ServerAdvice(ctx); err != nil || len(advice) != 0 {
			t.Errorf("%s: advice %q, %v; want none", d, advice, err)
		}
	}
}
