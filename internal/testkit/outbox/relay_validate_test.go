package outbox_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
)

// badRow is a row a foreign producer writes and why the relay refuses it.
type badRow struct{ topic, key, headers, reason string }

// TestRelayRevalidatesPlainSQLRows: rows written with plain SQL get the
// producer's topic, key and header rules before anything is published.
// Those that break them go dead with the reason, with metrics on (a topic
// that is not UTF-8 used to panic in the metrics code), and never reach a
// destination; the valid row next to them is delivered.
func TestRelayRevalidatesPlainSQLRows(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		s := newSink()
		cfg := harness.Config(outbox.Route{Pattern: "order.*", Publisher: outbox.PublisherFunc(s.publish)})
		reg := prometheus.NewRegistry()
		cfg.Metrics = reg
		r, err := h.NewRelay(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cases := []badRow{
			{"order.x/admin/cmd", "", "{}", "invalid topic"},
			{"order.a b", "", "{}", "invalid topic"},
			{"order.spoof", "", `{"outbox-business-key":"someone-else"}`, "is reserved"},
			{"order.header", "", `{"bad name":"x"}`, "invalid header name"},
		}
		switch h.DB.Dialect {
		case store.SQLite:
			// SQLite stores any bytes in a TEXT column.
			cases = append(cases,
				badRow{"order.\xff\xfe", "", "{}", "invalid topic"},
				badRow{"order.key", "k\xff", "{}", "invalid business key"})
		case store.MySQL:
			// MariaDB takes an empty string for a NOT NULL column, in a
			// table without schema version 17's checks.
			h.DB.Exec(t, "ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_topic_length")
			cases = append(cases, badRow{"", "", "{}", "topic is required"})
		}
		insert := testdb.Placeholder(h.DB.Dialect, "INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES (?, ?, '{}', ?)")
		for _, c := range cases {
			var key any
			if c.key != "" {
				key = c.key
			}
			h.DB.Exec(t, insert, c.topic, key, c.headers)
		}
		good, err := h.Enqueue(context.Background(), msgs(1, "order.ok", nil), false)
		if err != nil {
			t.Fatal(err)
		}
		relaytest.Run(t, r)
		relaytest.WaitFor(t, time.Minute, "every bad row dead", func() bool {
			return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead'") == len(cases)
		})
		relaytest.WaitFor(t, time.Minute, "the valid row delivered", func() bool { return s.distinct() == 1 })
		if s.count[good[0]] != 1 || s.total() != 1 {
			t.Fatalf("published %d envelopes, want only %s", s.total(), good[0])
		}
		dead, err := h.DB.Store().List(context.Background(), store.Filter{Status: store.StatusDead, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			found := false
			for _, m := range dead {
				if m.Topic == c.topic && strings.Contains(m.LastError, c.reason) {
					found = true
				}
			}
			if !found {
				t.Errorf("row with topic %q: no dead row with %q in its error (dead: %+v)", c.topic, c.reason, dead)
			}
		}
		if _, err := reg.Gather(); err != nil {
			t.Fatalf("metrics do not gather: %v", err)
		}
	})
}

// TestRelayScrubsLastError: a receiver that quotes credentials in its
// answer does not get them stored in last_error.
func TestRelayScrubsLastError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"rejected","token":"tok-9f8e7d6c","echo":"Authorization: Bearer sk-live-41a2b3c4d5"}`)
	}))
	t.Cleanup(srv.Close)
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		pub, err := outboxwebhook.New(srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		r, err := h.NewRelay(harness.Config(outbox.Route{Pattern: "order.*", Publisher: pub}))
		if err != nil {
			t.Fatal(err)
		}
		ids, err := h.Enqueue(context.Background(), msgs(1, "order.created", nil), false)
		if err != nil {
			t.Fatal(err)
		}
		relaytest.Run(t, r)
		relaytest.WaitFor(t, time.Minute, "the message dead", func() bool {
			return h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead'") == 1
		})
		got := listOne(t, h, ids[0]).LastError
		if !strings.Contains(got, "400") || !strings.Contains(got, "rejected") {
			t.Errorf("last_error %q lacks the status and the reason", got)
		}
		for _, secret := range []string{"tok-9f8e7d6c", "sk-live-41a2b3c4d5"} {
			if strings.Contains(got, secret) {
				t.Errorf("last_error %q keeps a credential", got)
			}
		}
	})
}
