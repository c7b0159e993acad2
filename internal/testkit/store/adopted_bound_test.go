package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/adopt/adoptyaml"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestAdoptedReadLeavesOutOversizePayloads: an adopted table's read
// measures each payload and leaves out one past the relay's bound, as the
// outbox table's read does: such a row comes back Oversize with its size,
// the others whole.
func TestAdoptedReadLeavesOutOversizePayloads(t *testing.T) {
	for _, d := range []store.Dialect{store.Postgres, store.MySQL, store.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			adopttest.Create(t, db, "laravel")
			adopttest.Insert(t, db, "laravel", 1, 1, "order.created")
			adopttest.Insert(t, db, "laravel", 2, 1, "order.created")
			big := `{"pad":"` + strings.Repeat("x", 4000) + `"}`
			db.Exec(t, testdb.Placeholder(d, "UPDATE local_messages SET payload = ? WHERE id = 2"), big)
			p, err := adoptyaml.Load("laravel")
			if err != nil {
				t.Fatal(err)
			}
			a, err := adoptstore.New(db.Backend().Store.WithPayloadLimit(1024), p)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := a.Read(context.Background(), []int{0}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2 {
				t.Fatalf("read %d rows, want 2", len(rows))
			}
			small, huge := rows[0], rows[1]
			if small.Oversize || small.Payload == "" || small.PayloadBytes != int64(len(small.Payload)) {
				t.Errorf("small row: oversize %v, %d bytes, payload %q", small.Oversize, small.PayloadBytes, small.Payload)
			}
			if !huge.Oversize || huge.Payload != "" || huge.PayloadBytes != int64(len(big)) {
				t.Errorf("big row: oversize %v, %d bytes (want %d), payload of %d bytes", huge.Oversize, huge.PayloadBytes, len(big), len(huge.Payload))
			}
			// Without a limit every payload is read whole.
			a, err = adoptstore.New(db.Backend().Store, p)
			if err != nil {
				t.Fatal(err)
			}
			if rows, err = a.Read(context.Background(), []int{0}, 10); err != nil || len(rows) != 2 || rows[1].Oversize || rows[1].Payload != big {
				t.Fatalf("without a limit: %d rows, err %v", len(rows), err)
			}
		})
	}
}
