package relaytest_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestMaxAgeExpiresOldMessages: on a route with max_age=30m, rows written
// by plain SQL an hour ago expire instead of going out — the head of a
// key, whose later message then goes out, and one without a key — while
// an hour-old row of a route without max_age and a fresh row are
// delivered. On every database, through the relay command.
func TestMaxAgeExpiresOldMessages(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			var mu sync.Mutex
			var bodies []string
			_, url := newReceiver(t, func(body string) (int, http.Header) {
				mu.Lock()
				bodies = append(bodies, body)
				mu.Unlock()
				return http.StatusOK, nil
			})
			old := testdb.Ago(d, time.Hour)
			db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload, created_at) VALUES ('quote.price', 'k1', '{"n":1}', `+old+`)`)
			db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('quote.price', 'k1', '{"n":2}')`)
			db.Exec(t, `INSERT INTO outbox_messages (topic, payload, created_at) VALUES ('quote.price', '{"n":3}', `+old+`)`)
			db.Exec(t, `INSERT INTO outbox_messages (topic, payload, created_at) VALUES ('order.created', '{"n":4}', `+old+`)`)
			relaytest.StartRelay(t, db.URL, "--route", "quote.>="+url+"?max_age=30m", "--to", url, "--probe-interval", "25ms")
			relaytest.WaitFor(t, time.Minute, "2 expired and 2 sent", func() bool {
				return relaytest.Count(t, db, store.StatusExpired) == 2 && relaytest.Count(t, db, store.StatusSent) == 2
			})
			mu.Lock()
			got := slices.Clone(bodies)
			mu.Unlock()
			slices.Sort(got)
			if strings.Join(got, " ") != `{"n":2} {"n":4}` {
				t.Errorf("delivered %v, want the fresh message of k1 and the old one of a route without max_age", got)
			}
			if n := db.Count(t, `SELECT count(*) FROM outbox_messages WHERE status = 'expired' AND last_error LIKE 'expired: older than the max_age 30m0s of route quote.>%'`); n != 2 {
				t.Errorf("%d expired messages say why, want 2", n)
			}
		})
	}
}
