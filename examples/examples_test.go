// Package examples_test runs the example services end to end: the orders
// service and the inventory consumer as their own processes, a relay in
// between, against the local PostgreSQL and NATS.
package examples_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxnats"
)

var natsURL = brokertest.NATSURL

// build compiles the example commands into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// go test puts the go command it runs under first on PATH.
	gobin := "go"
	cmd := exec.Command(gobin, "build", "-o", dir+string(filepath.Separator),
		"github.com/txoutbox/outbox/examples/orders", "github.com/txoutbox/outbox/examples/inventory")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the examples: %v\n%s", err, out)
	}
	return dir
}

// service runs one example command with env; at cleanup it is stopped
// with SIGTERM and must exit 0. Its output is shown if the test failed.
func service(t *testing.T, bin string, env ...string) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", filepath.Base(bin), err)
			}
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("%s did not stop within 15s of SIGTERM", filepath.Base(bin))
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
}

// order posts one order and returns the ids in the answer; a refused
// connection (the service still starting) is reported as such.
func order(addr, sku string, qty int) (orderID int64, messageID string, err error) {
	resp, err := http.Post("http://"+addr+"/orders", "application/json", strings.NewReader(fmt.Sprintf(`{"sku":%q,"qty":%d}`, sku, qty)))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return 0, "", fmt.Errorf("POST /orders: %s", resp.Status)
	}
	var body struct {
		OrderID   int64  `json:"order_id"`
		MessageID string `json:"message_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	return body.OrderID, body.MessageID, err
}

// TestOrderReservesStockOnce: orders → outbox (PostgreSQL) → relay →
// JetStream → inventory with its inbox: each order reserves stock exactly
// once, and an order for more than is available is recorded as such.
func TestOrderReservesStockOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the examples: -short")
	}
	ctx := t.Context()
	_, js := brokertest.JetStream(t, natsURL)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	stream := "exampletest_" + hex.EncodeToString(b)
	subject := stream + ".order.created"
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })

	ordersDB := testdb.New(t, store.Postgres)      // `outbox migrate`
	inventoryDB := testdb.Empty(t, store.Postgres) // `outbox migrate --inbox-only`
	s, err := inventoryDB.Backend().Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.MigrateInbox(ctx, store.Postgres, s)
	_ = s.Close()
	if err != nil {
		t.Fatal(err)
	}

	bin := build(t)
	service(t, filepath.Join(bin, "inventory"), "DATABASE_URL="+inventoryDB.URL, "NATS_URL="+natsURL, "STREAM="+stream, "SUBJECT="+subject)
	relaytest.WaitFor(t, 30*time.Second, "the inventory consumer", func() bool {
		_, err := js.Consumer(ctx, stream, "inventory")
		return err == nil
	})
	addr := "127.0.0.1:" + strconv.Itoa(brokertest.FreePort(t))
	service(t, filepath.Join(bin, "orders"), "DATABASE_URL="+ordersDB.URL, "ADDR="+addr, "TOPIC="+subject)

	pub, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Start(t, ordersDB, relaytest.Config(pub))

	type placed struct {
		sku       string
		qty       int
		messageID string
	}
	orders := map[int64]placed{}
	for _, o := range []placed{{sku: "sku-1", qty: 2}, {sku: "sku-2", qty: 1}, {sku: "sku-1", qty: 3}, {sku: "sku-3", qty: 10}} {
		var id int64
		var err error
		relaytest.WaitFor(t, 30*time.Second, "the orders service to take an order", func() bool {
			id, o.messageID, err = order(addr, o.sku, o.qty)
			var op *net.OpError
			return err == nil || !errors.As(err, &op)
		})
		if err != nil {
			t.Fatal(err)
		}
		orders[id] = o
	}
	relaytest.WaitFor(t, 30*time.Second, "a reservation for every order", func() bool {
		return inventoryDB.Count(t, `SELECT count(*) FROM reservations`) == len(orders)
	})

	for id, o := range orders {
		var sku, status, messageID string
		var qty int
		if err := inventoryDB.Pool.QueryRow(ctx, `SELECT sku, qty, status, message_id FROM reservations WHERE order_id = $1`, id).Scan(&sku, &qty, &status, &messageID); err != nil {
			t.Fatalf("order %d: %v", id, err)
		}
		want := "reserved"
		if o.sku == "sku-3" {
			want = "out_of_stock" // 10 ordered, 5 in stock
		}
		if sku != o.sku || qty != o.qty || status != want || messageID != o.messageID {
			t.Errorf("order %d: reservation (%s, %d, %s, %s), want (%s, %d, %s, %s)", id, sku, qty, status, messageID, o.sku, o.qty, want, o.messageID)
		}
	}
	for sku, want := range map[string][2]int{"sku-1": {95, 5}, "sku-2": {99, 1}, "sku-3": {5, 0}} {
		var available, reserved int
		if err := inventoryDB.Pool.QueryRow(ctx, `SELECT available, reserved FROM stock WHERE sku = $1`, sku).Scan(&available, &reserved); err != nil {
			t.Fatal(err)
		}
		if available != want[0] || reserved != want[1] {
			t.Errorf("%s: available %d, reserved %d; want %d, %d", sku, available, reserved, want[0], want[1])
		}
	}
	if n := inventoryDB.Count(t, `SELECT count(*) FROM outbox_inbox WHERE consumer = 'inventory'`); n != len(orders) {
		t.Errorf("%d inbox records, want %d", n, len(orders))
	}
	relaytest.WaitFor(t, 10*time.Second, "every message marked sent", func() bool {
		return relaytest.Count(t, ordersDB, "sent") == len(orders)
	})
}
