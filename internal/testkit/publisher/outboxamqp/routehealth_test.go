package outboxamqp_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestRelayUnroutableRouteDown runs `outbox relay` to an exchange with no
// queue bound: every message is unroutable, so the route goes down —
// nothing dead, nothing recorded sent; once a queue is bound every
// message is delivered.
func TestRelayUnroutableRouteDown(t *testing.T) {
	conn := dialRabbit(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	exchange := testdb.RandomName("outboxtest_")
	if err := ch.ExchangeDeclare(exchange, "topic", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	var msgs []outbox.Message
	for i := range 30 {
		msgs = append(msgs, outbox.Message{Topic: "order.created", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	if _, err := e.Enqueue(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	// The exchange is auto-delete: it goes with the queue bound below.
	to := rabbitURL + "?exchange=" + url.QueryEscape(exchange) + "&probe_max=2s"
	p := relaytest.StartRelay(t, db.URL, "--to", to)
	relaytest.WaitFor(t, time.Minute, "the route down", func() bool { return p.Logged("route down:") == 1 })
	time.Sleep(3 * time.Second) // a few probes
	if sent, dead := relaytest.Count(t, db, store.StatusSent), relaytest.Count(t, db, store.StatusDead); sent != 0 || dead != 0 {
		t.Fatalf("while unroutable: %d sent, %d dead; want none", sent, dead)
	}
	c := consume(t, exchange, "#")
	c.waitN(t, 30, time.Minute)
	relaytest.WaitFor(t, time.Minute, "30 sent", func() bool { return relaytest.Count(t, db, store.StatusSent) == 30 })
	p.Stop(t)
	if p.Logged("route up again after") != 1 || relaytest.Count(t, db, store.StatusDead) != 0 {
		t.Fatalf("route up lines %d, dead %d", p.Logged("route up again after"), relaytest.Count(t, db, store.StatusDead))
	}
}
