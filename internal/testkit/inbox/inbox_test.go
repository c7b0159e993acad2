package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// deliveries returns n ids, each repeated 1–3 times, shuffled: what an
// at-least-once broker hands a consumer group.
func deliveries(n int) ([]string, []string) {
	ids := make([]string, n)
	var all []string
	for i := range ids {
		ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		for k := 0; k < 1+rand.IntN(3); k++ {
			all = append(all, ids[i])
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return ids, all
}

// consume feeds the deliveries to 8 goroutines; a failed Handle is
// redelivered, as a broker would after a missing ack.
func consume(t *testing.T, all []string, handle func(ctx context.Context, id string) (bool, error)) (applied int64) {
	t.Helper()
	ch := make(chan string, 1024)
	var wg sync.WaitGroup
	var count atomic.Int64
	var failures atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ch {
				for attempt := 0; ; attempt++ {
					ok, err := handle(context.Background(), id)
					if err == nil {
						if ok {
							count.Add(1)
						}
						break
					}
					if failures.Add(1) > 1000 || attempt > 50 {
						t.Errorf("handle %s: %v", id, err)
						return
					}
				}
			}
		}()
	}
	for _, id := range all {
		ch <- id
	}
	close(ch)
	wg.Wait()
	return count.Load()
}

func messages(t *testing.T) int {
	if testing.Short() || os.Getenv("OUTBOX_INBOX_MESSAGES") == "small" {
		return 5000
	}
	return 100000
}

// withEffects runs fn on each dialect, in parallel, with a fresh
// database holding an effects table that handlers write to.
func withEffects(t *testing.T, fn func(t *testing.T, d store.Dialect, db *testdb.DB)) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			db.Exec(t, "CREATE TABLE effects (message_id VARCHAR(64) NOT NULL)")
			fn(t, d, db)
		})
	}
}

func TestExactlyOnceUnderConcurrentDuplicates(t *testing.T) {
	withEffects(t, func(t *testing.T, d store.Dialect, db *testdb.DB) {
		n := messages(t)
		ids, all := deliveries(n)
		var applied int64
		if d == store.Postgres {
			ib, err := inbox.New(db.PGX, &inbox.Config{Consumer: "inventory"})
			if err != nil {
				t.Fatal(err)
			}
			applied = consume(t, all, func(ctx context.Context, id string) (bool, error) {
				return ib.Handle(ctx, id, func(ctx context.Context, tx pgx.Tx) error {
					_, err := tx.Exec(ctx, "INSERT INTO effects (message_id) VALUES ($1)", id)
					return err
				})
			})
		} else {
			ib, err := inbox.New(db.Std, &inbox.Config{Consumer: "inventory"})
			if err != nil {
				t.Fatal(err)
			}
			applied = consume(t, all, func(ctx context.Context, id string) (bool, error) {
				return ib.Handle(ctx, id, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO effects (message_id) VALUES (?)", id)
					return err
				})
			})
		}
		effects := db.Count(t, "SELECT count(*) FROM effects")
		distinct := db.Count(t, "SELECT count(DISTINCT message_id) FROM effects")
		t.Logf("%d deliveries of %d ids → %d effects", len(all), len(ids), effects)
		if effects != n || distinct != n || applied != int64(n) {
			t.Fatalf("%d effects (%d distinct, %d reported applied) for %d messages", effects, distinct, applied, n)
		}
	})
}

func TestHandlerFailureRollsBackAndRedeliveryAppliesOnce(t *testing.T) {
	withEffects(t, func(t *testing.T, d store.Dialect, db *testdb.DB) {
		ib, err := inbox.New(db.Std, &inbox.Config{Consumer: "billing"})
		if err != nil {
			t.Fatal(err)
		}
		id := "0192f0c4-3a6e-7cc4-9a3b-1f2e3d4c5b6a"
		boom := errors.New("downstream timeout")
		calls := 0
		handler := func(ctx context.Context, tx *sql.Tx) error {
			calls++
			if _, err := tx.ExecContext(ctx, testdb.Placeholder(d, "INSERT INTO effects (message_id) VALUES (?)"), id); err != nil {
				return err
			}
			if calls == 1 {
				return boom // after writing: the effect must roll back
			}
			return nil
		}
		applied, err := ib.Handle(context.Background(), id, handler)
		if !errors.Is(err, boom) || applied {
			t.Fatalf("first delivery: applied=%v err=%v", applied, err)
		}
		if n := db.Count(t, "SELECT count(*) FROM effects") + db.Count(t, "SELECT count(*) FROM outbox_inbox"); n != 0 {
			t.Fatalf("%d rows left by a failed handler", n)
		}
		for i := 0; i < 3; i++ {
			applied, err = ib.Handle(context.Background(), id, handler)
			if err != nil || applied != (i == 0) {
				t.Fatalf("redelivery %d: applied=%v err=%v", i, applied, err)
			}
		}
		if n := db.Count(t, "SELECT count(*) FROM effects"); n != 1 || calls != 2 {
			t.Fatalf("%d effects after %d handler calls", n, calls)
		}
		// Another consumer processes the same message independently.
		other, _ := inbox.New(db.Std, &inbox.Config{Consumer: "analytics"})
		if ok, err := other.Handle(context.Background(), id, func(context.Context, *sql.Tx) error { return nil }); !ok || err != nil {
			t.Fatalf("second consumer: %v %v", ok, err)
		}
	})
}

func TestConfigAndPurge(t *testing.T) {
	db := testdb.New(t, store.SQLite)
	if _, err := inbox.New(db.Std, &inbox.Config{}); err == nil {
		t.Fatal("no consumer accepted")
	}
	horizon := outbox.RetryPolicy{Base: time.Second, Cap: time.Hour}.Horizon(10)
	if _, err := inbox.New(db.Std, &inbox.Config{Consumer: "c", Retention: horizon, RetryHorizon: horizon}); !errors.Is(err, inbox.ErrRetentionTooShort) {
		t.Fatalf("retention equal to the horizon: %v", err)
	}
	if _, err := inbox.New(db.Std, &inbox.Config{Consumer: "c", Retention: time.Hour}); !errors.Is(err, inbox.ErrRetentionTooShort) {
		t.Fatalf("one hour retention against the default horizon: %v", err)
	}
	ib, err := inbox.New(db.Std, &inbox.Config{Consumer: "c", Retention: 2 * time.Hour, RetryHorizon: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"old-1", "old-2", "new-1"} {
		if ok, err := ib.Handle(context.Background(), id, func(context.Context, *sql.Tx) error { return nil }); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	db.Exec(t, "UPDATE outbox_inbox SET processed_at = '2000-01-01 00:00:00.000' WHERE message_id LIKE 'old-%'")
	n, err := ib.Purge(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if ok, _ := ib.Handle(context.Background(), "new-1", func(context.Context, *sql.Tx) error { return nil }); ok {
		t.Fatal("a kept record did not dedupe")
	}
}
