package relaytest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// TestHugeRowsCostTheRelayNoMemory: three 150 MB payloads written by
// plain SQL beside ordinary messages. The relay process reads their
// length, not their bytes: they go dead with their size in the reason,
// the others are delivered, and the relay's peak resident memory stays
// far below one such payload.
func TestHugeRowsCostTheRelayNoMemory(t *testing.T) {
	const size = 150 << 20
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	rec, url := newReceiver(t, func(string) (int, http.Header) { return http.StatusOK, nil })
	for i := range 3 {
		db.Exec(t, fmt.Sprintf("INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('order.huge', 'h%d', repeat('x', %d))", i, size))
	}
	enqueue(t, e, 20, func(i int) outbox.Message {
		return outbox.Message{Topic: "order.created", Key: fmt.Sprintf("k%d", i%4), Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
	})
	p := relaytest.StartRelay(t, db.URL, "--to", url)
	relaytest.WaitFor(t, 2*time.Minute, "20 delivered, 3 dead", func() bool {
		return rec.count() == 20 && relaytest.Count(t, db, store.StatusDead) == 3
	})
	reason := fmt.Sprintf("payload too large: %d bytes, limit %d", size, outbox.DefaultMaxPayloadBytes)
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead' AND last_error = $1", reason); n != 3 {
		var got string
		_ = db.SQL.QueryRow("SELECT last_error FROM outbox_messages WHERE status = 'dead' LIMIT 1").Scan(&got)
		t.Fatalf("%d of 3 dead with %q; one says %q", n, reason, got)
	}
	peak := p.PeakRSS(t)
	t.Logf("relay peak RSS %.1f MiB with three %d MiB rows", float64(peak)/(1<<20), size>>20)
	if peak > size/2 {
		t.Fatalf("relay peak RSS %d MiB: a huge payload was loaded", peak>>20)
	}
	p.Stop(t)
}
