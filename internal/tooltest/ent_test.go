package tooltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/drivertest"
	"github.com/txoutbox/outbox/driver/outboxsql"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/tooltest/ent"
)

var entDialects = []store.Dialect{store.Postgres, store.MySQL}

// openEnt opens an ent client over db's *sql.DB.
func openEnt(t *testing.T, db *testdb.DB) *ent.Client {
	t.Helper()
	name := dialect.Postgres
	if db.Dialect == store.MySQL {
		name = dialect.MySQL
	}
	return ent.NewClient(ent.Driver(entsql.OpenDB(name, db.SQL)))
}

// entDriver is the README's ent recipe: with ent's sql/execquery feature
// an *ent.Tx runs raw statements (ExecContext, QueryContext) in its
// transaction, which is all outboxsql.Adapt asks of it.
func entDriver(t *testing.T, db *testdb.DB, client *ent.Client) *outboxsql.Adapter[*ent.Tx] {
	t.Helper()
	base, err := outboxsql.New(db.SQL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return outboxsql.Adapt(base,
		func(tx *ent.Tx) outboxsql.Conn { return tx },
		func(ctx context.Context, fn func(*ent.Tx) error) error {
			tx, err := client.Tx(ctx)
			if err != nil {
				return err
			}
			if err := fn(tx); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		})
}

// TestEntConformance runs the driver conformance suite through ent's
// transactions.
func TestEntConformance(t *testing.T) {
	for _, d := range entDialects {
		t.Run(string(d), func(t *testing.T) {
			drivertest.Run(t, func(t *testing.T) driver.Driver[*ent.Tx] {
				db := testdb.Empty(t, d)
				return entDriver(t, db, openEnt(t, db))
			})
		})
	}
}

// entOrder writes order id with ent and its message in one ent
// transaction, failing after both when abort is set.
func entOrder(ctx context.Context, client *ent.Client, producer *outbox.Producer[*ent.Tx], id int64, abort bool) error {
	tx, err := client.Tx(ctx)
	if err != nil {
		return err
	}
	if err := tx.Order.Create().SetID(id).SetTotal(42).Exec(ctx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := enqueue(ctx, producer, tx, id, abort); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// TestEntRecipe: an ent entity and its outbox message commit together in
// one ent transaction, neither is left by a transaction rolled back after
// both were written, and a relay delivers the committed message.
func TestEntRecipe(t *testing.T) {
	for _, d := range entDialects {
		t.Run(string(d), func(t *testing.T) {
			db := testdb.New(t, d)
			db.Exec(t, "CREATE TABLE orders (id BIGINT PRIMARY KEY, total BIGINT NOT NULL)")
			client := openEnt(t, db)
			producer := newProducer(t, entDriver(t, db, client))
			ctx := context.Background()
			if err := entOrder(ctx, client, producer, 1, false); err != nil {
				t.Fatalf("committed transaction: %v", err)
			}
			if err := entOrder(ctx, client, producer, 2, true); !errors.Is(err, errAbort) {
				t.Fatalf("rolled back transaction returned %v, want %v", err, errAbort)
			}
			if n, err := client.Order.Query().Count(ctx); err != nil || n != 1 {
				t.Errorf("%d orders (%v) after one committed and one rolled back transaction, want 1", n, err)
			}
			if n := db.Count(t, "SELECT count(*) FROM outbox_messages"); n != 1 {
				t.Errorf("%d messages enqueued after one committed and one rolled back transaction, want 1", n)
			}

			var mu sync.Mutex
			var keys []string
			relaytest.Start(t, db, &outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "order.*", Publisher: outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
				mu.Lock()
				keys = append(keys, env.Key)
				mu.Unlock()
				return nil
			})}}})
			relaytest.WaitFor(t, 20*time.Second, "the committed order's message delivered", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(keys) > 0
			})
			relaytest.WaitFor(t, 10*time.Second, "the message marked sent", func() bool {
				return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'") == 1
			})
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(keys) != "[1]" {
				t.Errorf("delivered keys %v, want [1]", keys)
			}
		})
	}
}
