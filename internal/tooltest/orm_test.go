package tooltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/schema"
	gormmysql "gorm.io/driver/mysql"
	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/drivertest"
	"github.com/txoutbox/outbox/driver/outboxsql"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// openGORM opens GORM over db's *sql.DB.
func openGORM(t *testing.T, db *testdb.DB, prepare bool) *gorm.DB {
	t.Helper()
	var dialector gorm.Dialector
	switch db.Dialect {
	case store.Postgres:
		dialector = gormpostgres.New(gormpostgres.Config{Conn: db.SQL})
	case store.MySQL:
		dialector = gormmysql.New(gormmysql.Config{Conn: db.SQL, SkipInitializeWithVersion: true})
	default:
		t.Fatalf("no GORM dialector for %s in these tests", db.Dialect)
	}
	g, err := gorm.Open(dialector, &gorm.Config{PrepareStmt: prepare, Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// gormDriver is the README's GORM recipe.
func gormDriver(t *testing.T, g *gorm.DB) *outboxsql.Adapter[*gorm.DB] {
	t.Helper()
	sqlDB, err := g.DB()
	if err != nil {
		t.Fatal(err)
	}
	base, err := outboxsql.New(sqlDB, nil)
	if err != nil {
		t.Fatal(err)
	}
	return outboxsql.Adapt(base,
		func(tx *gorm.DB) outboxsql.Conn { return tx.Statement.ConnPool },
		func(ctx context.Context, fn func(*gorm.DB) error) error {
			return g.WithContext(ctx).Transaction(fn)
		})
}

var gormDialects = []store.Dialect{store.Postgres, store.MySQL}

// TestGORMConformance runs the driver conformance suite through GORM's
// transactions, with and without PrepareStmt (whose transactions are not
// a *sql.Tx).
func TestGORMConformance(t *testing.T) {
	for _, d := range gormDialects {
		for _, prepare := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/PrepareStmt=%v", d, prepare), func(t *testing.T) {
				drivertest.Run(t, func(t *testing.T) driver.Driver[*gorm.DB] {
					return gormDriver(t, openGORM(t, testdb.Empty(t, d), prepare))
				})
			})
		}
	}
}

// order is the business row the recipes write beside their message.
type order struct {
	ID    int64 `gorm:"primaryKey" bun:",pk"`
	Total int64
}

var errAbort = errors.New("abort: the business step failed")

// recipe writes an order and its message in one transaction of an ORM,
// failing after both when abort is set.
type recipe struct {
	name     string
	dialects []store.Dialect
	run      func(t *testing.T, db *testdb.DB, id int64, abort bool) error
}

var recipes = []recipe{
	{"gorm", gormDialects, func(t *testing.T, db *testdb.DB, id int64, abort bool) error {
		g := openGORM(t, db, true)
		producer := newProducer(t, gormDriver(t, g))
		return g.Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&order{ID: id, Total: 42}).Error; err != nil {
				return err
			}
			return enqueue(tx.Statement.Context, producer, tx, id, abort)
		})
	}},
	{"sqlx", testdb.Dialects, func(t *testing.T, db *testdb.DB, id int64, abort bool) error {
		x := sqlx.NewDb(db.SQL, string(db.Dialect))
		producer := newProducer(t, db.Std)
		tx, err := x.Beginx()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(x.Rebind("INSERT INTO orders (id, total) VALUES (?, ?)"), id, 42); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := enqueue(context.Background(), producer, tx.Tx, id, abort); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}},
	{"bun", testdb.Dialects, func(t *testing.T, db *testdb.DB, id int64, abort bool) error {
		var dialect schema.Dialect
		switch db.Dialect {
		case store.Postgres:
			dialect = pgdialect.New()
		case store.MySQL:
			dialect = mysqldialect.New()
		default:
			dialect = sqlitedialect.New()
		}
		b := bun.NewDB(db.SQL, dialect)
		producer := newProducer(t, db.Std)
		return b.RunInTx(context.Background(), nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewInsert().Model(&order{ID: id, Total: 42}).ModelTableExpr("orders").Exec(ctx); err != nil {
				return err
			}
			return enqueue(ctx, producer, tx.Tx, id, abort)
		})
	}},
}

func newProducer[TTx any](t *testing.T, drv driver.Driver[TTx]) *outbox.Producer[TTx] {
	t.Helper()
	p, err := outbox.NewProducer(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func enqueue[TTx any](ctx context.Context, p *outbox.Producer[TTx], tx TTx, id int64, abort bool) error {
	if _, err := p.Enqueue(ctx, tx, outbox.Message{Topic: "order.created", Key: fmt.Sprint(id), Payload: fmt.Appendf(nil, `{"order_id":%d}`, id)}); err != nil {
		return err
	}
	if abort {
		return errAbort
	}
	return nil
}

// TestORMRecipes: the order and its message commit together in the ORM's
// transaction, and neither is left when the transaction fails after both
// were written.
func TestORMRecipes(t *testing.T) {
	for _, r := range recipes {
		for _, d := range r.dialects {
			t.Run(r.name+"/"+string(d), func(t *testing.T) {
				db := testdb.New(t, d)
				db.Exec(t, "CREATE TABLE orders (id BIGINT PRIMARY KEY, total BIGINT NOT NULL)")
				if err := r.run(t, db, 1, false); err != nil {
					t.Fatalf("committed transaction: %v", err)
				}
				if err := r.run(t, db, 2, true); !errors.Is(err, errAbort) {
					t.Fatalf("aborted transaction returned %v, want %v", err, errAbort)
				}
				for _, c := range []struct {
					what, q string
				}{
					{"orders", "SELECT count(*) FROM orders"},
					{"messages", "SELECT count(*) FROM outbox_messages WHERE topic = 'order.created'"},
				} {
					if n := db.Count(t, c.q); n != 1 {
						t.Errorf("%d %s after one committed and one aborted transaction, want 1", n, c.what)
					}
				}
				if n := db.Count(t, testdb.Placeholder(d, "SELECT count(*) FROM outbox_messages WHERE business_key = ?"), "1"); n != 1 {
					t.Errorf("the committed order's message is missing")
				}
			})
		}
	}
}

// TestGORMPrepareStmtHidesTheTx: with PrepareStmt, a GORM transaction's
// ConnPool is not a *sql.Tx, which is why the recipe adapts ConnPool
// instead of asking for one.
func TestGORMPrepareStmtHidesTheTx(t *testing.T) {
	g := openGORM(t, testdb.Empty(t, store.Postgres), true)
	err := g.Transaction(func(tx *gorm.DB) error {
		if _, ok := tx.Statement.ConnPool.(*sql.Tx); ok {
			return errors.New("ConnPool is a *sql.Tx with PrepareStmt")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
