package outboxsql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/outboxsql"
)

// openApp opens the application's database (SQLite, in memory), with its
// users table and the outbox's tables.
func openApp() (*sql.DB, *outboxsql.Driver) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1) // the in-memory database lives in its one connection
	drv, err := outboxsql.New(db, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := outbox.Migrate(context.Background(), drv, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE users (email TEXT PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}
	return db, drv
}

// InTx runs the business write and the Enqueue in one transaction. The
// driver translates the database's errors, so a duplicate row is
// driver.ErrUniqueViolation on SQLite, PostgreSQL and MySQL alike, and
// the rolled-back signup sends no welcome e-mail.
func ExampleDriver_InTx() {
	db, drv := openApp()
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	signUp := func(email string) error {
		return drv.InTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO users (email) VALUES (?)", email); err != nil {
				return err
			}
			_, err := producer.Enqueue(ctx, tx, outbox.Message{
				Topic:   "user.signed_up",
				Payload: fmt.Appendf(nil, `{"email":%q}`, email),
			})
			return err
		})
	}
	fmt.Println("first:", signUp("ada@example.com"))
	err = signUp("ada@example.com")
	fmt.Println("again, already a user:", errors.Is(err, driver.ErrUniqueViolation))

	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM outbox_messages").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("welcome messages:", n)
	// Output:
	// first: <nil>
	// again, already a user: true
	// welcome messages: 1
}

// UnitOfWork stands for an ORM's transaction type (GORM's *gorm.DB, an
// *ent.Tx): the type the application's code passes around instead of a
// *sql.Tx.
type UnitOfWork struct {
	tx *sql.Tx
}

// Adapt makes a driver whose Enqueue takes the ORM's own transaction: it
// needs what runs statements inside one, and how to begin one.
func ExampleAdapt() {
	db, base := openApp()
	defer func() { _ = db.Close() }()
	ctx := context.Background()

	drv := outboxsql.Adapt(base,
		func(uow *UnitOfWork) outboxsql.Conn { return uow.tx },
		func(ctx context.Context, fn func(*UnitOfWork) error) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := fn(&UnitOfWork{tx: tx}); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		})
	producer, err := outbox.NewProducer(drv, nil) // a *Producer[*UnitOfWork]
	if err != nil {
		log.Fatal(err)
	}
	err = drv.InTx(ctx, func(uow *UnitOfWork) error {
		if _, err := uow.tx.ExecContext(ctx, "INSERT INTO users (email) VALUES (?)", "ada@example.com"); err != nil {
			return err
		}
		_, err := producer.Enqueue(ctx, uow, outbox.Message{Topic: "user.signed_up", Payload: []byte(`{"email":"ada@example.com"}`)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	var topic string
	if err := db.QueryRowContext(ctx, "SELECT topic FROM outbox_messages").Scan(&topic); err != nil {
		log.Fatal(err)
	}
	fmt.Println(topic)
	// Output: user.signed_up
}
