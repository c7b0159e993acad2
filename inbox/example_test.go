package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxsql"
	"github.com/txoutbox/outbox/inbox"
)

// Handle applies a delivery's effect and records its message id in one
// transaction, so a redelivery of the same message changes nothing. The
// example runs on an in-memory SQLite database; outbox.Migrate creates the
// inbox's table.
func ExampleInbox_Handle() {
	// One connection to a private in-memory database: it lives as long
	// as the connection does.
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	drv, err := outboxsql.New(db, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := outbox.Migrate(ctx, drv, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE stock (sku TEXT PRIMARY KEY, reserved INTEGER NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO stock VALUES ('sku-1', 0)"); err != nil {
		log.Fatal(err)
	}

	ib, err := inbox.New(drv, &inbox.Config{Consumer: "inventory"})
	if err != nil {
		log.Fatal(err)
	}
	reserve := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE stock SET reserved = reserved + 1 WHERE sku = 'sku-1'")
		return err
	}
	const messageID = "0190a0a0-0000-7000-8000-00000000002a"
	for delivery := 1; delivery <= 2; delivery++ { // the broker delivers it twice
		applied, err := ib.Handle(ctx, messageID, reserve)
		if err != nil {
			log.Fatal(err) // do not acknowledge: the broker redelivers
		}
		fmt.Printf("delivery %d: applied %v\n", delivery, applied)
	}
	var reserved int
	if err := db.QueryRowContext(ctx, "SELECT reserved FROM stock").Scan(&reserved); err != nil {
		log.Fatal(err)
	}
	fmt.Println("reserved:", reserved)
	// Output:
	// delivery 1: applied true
	// delivery 2: applied false
	// reserved: 1
}
