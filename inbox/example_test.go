package inbox_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/exampledb"
)

// Handle applies a delivery's effect and records its message id in one
// transaction, so a redelivery of the same message changes nothing. The
// example runs on a fresh PostgreSQL database; outbox.Migrate creates the
// inbox's table.
func ExampleInbox_Handle() {
	pool, drv, cleanup := exampledb.Open()
	defer cleanup()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE stock (sku text PRIMARY KEY, reserved bigint NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO stock VALUES ('sku-1', 0)"); err != nil {
		log.Fatal(err)
	}

	ib, err := inbox.New(drv, &inbox.Config{Consumer: "inventory"})
	if err != nil {
		log.Fatal(err)
	}
	reserve := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE stock SET reserved = reserved + 1 WHERE sku = 'sku-1'")
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
	if err := pool.QueryRow(ctx, "SELECT reserved FROM stock").Scan(&reserved); err != nil {
		log.Fatal(err)
	}
	fmt.Println("reserved:", reserved)
	// Output:
	// delivery 1: applied true
	// delivery 2: applied false
	// reserved: 1
}
