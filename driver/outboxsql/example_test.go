package outboxsql_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/outboxsql"
)

// A driver over the application's *sql.DB: the dialect follows the Go
// driver behind it (here modernc.org/sqlite). Producer.Enqueue then takes
// the *sql.Tx the application, or its GORM, sqlx or ent, already holds.
func ExampleNew() {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one connection: the in-memory database lives in it
	defer func() { _ = db.Close() }()
	ctx := context.Background()

	drv, err := outboxsql.New(db, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dialect:", drv.Dialect())
	if _, err := outbox.Migrate(ctx, drv, nil); err != nil {
		log.Fatal(err)
	}
	producer, err := outbox.NewProducer(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := producer.Enqueue(ctx, tx, outbox.Message{Topic: "user.signed_up", Payload: []byte(`{"user_id":7}`)}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM outbox_messages WHERE status = 'pending'").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending:", n)
	// Output:
	// dialect: sqlite
	// pending: 1
}

// With a Go driver the outbox does not recognise, Config names the
// dialect.
func ExampleNew_dialect() {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	drv, err := outboxsql.New(db, &outboxsql.Config{Dialect: driver.SQLite})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(drv.Dialect())
	// Output: sqlite
}
