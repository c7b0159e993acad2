package relaytest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestHugeRowsCostTheRelayNoMemory: three 150 MB payloads written by
// plain SQL beside ordinary messages. The relay process reads their
// length, not their bytes: they go dead with their size in the reason,
// the others are delivered, and the relay's peak resident memory stays
// below one such payload: the process itself (every destination's client
// linked in) peaks at about 70 MiB; a payload loaded would add its 150 MiB
// to that.
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
	if peak > size {
		t.Fatalf("relay peak RSS %d MiB: a huge payload was loaded", peak>>20)
	}
	p.Stop(t)
}

// TestHugeRowsInAnAdoptedTable: the same for a table the relay adopts:
// a 150 MB payload in Laravel's local_messages is measured, not loaded;
// it ends in the table's dead state and the other rows are sent.
func TestHugeRowsInAnAdoptedTable(t *testing.T) {
	const size = 150 << 20
	db := testdb.New(t, store.Postgres)
	adopttest.Create(t, db, "laravel")
	for i := range 10 {
		adopttest.Insert(t, db, "laravel", i, 3, "order.created")
	}
	db.Exec(t, fmt.Sprintf(`UPDATE local_messages SET payload = ('{"p":"' || repeat('x', %d) || '"}')::json WHERE id = 5`, size))
	_, url := newHooks(t, false, nil)
	p := relaytest.StartRelay(t, db.URL, adoptArgs("laravel", url)...)
	relaytest.WaitFor(t, 2*time.Minute, "9 rows sent, the huge one dead", func() bool {
		return statusCount(t, db, "laravel", "sent") == 9 &&
			db.Count(t, "SELECT count(*) FROM local_messages WHERE id = 5 AND status = 'failed' AND retry_times >= max_retry_times") == 1
	})
	peak := p.PeakRSS(t)
	t.Logf("relay peak RSS %.1f MiB with a %d MiB row", float64(peak)/(1<<20), size>>20)
	if peak > size {
		t.Fatalf("relay peak RSS %d MiB: the huge payload was loaded", peak>>20)
	}
	p.Stop(t)
}
