package outboxnats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxnats"
)

// A row inserted with plain SQL, as a producer in any language would,
// reaches a JetStream consumer with its id, key, headers and payload; a
// row whose subject no stream captures goes dead with the reason.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	_, js := connect(t)
	stream := newStream(t, js, nil)
	db := newPostgres(t)
	topic := stream + ".order.created"
	missing := "nostream_" + randomHex() + ".order.created"
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	db.Exec(t, "INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, 'order-42', '{\"order_id\":42}')", topic)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ($1, 'plain text', $2)`, topic,
		`{"content-type":"text/plain","x-tenant":"acme","traceparent":"`+traceparent+`"}`)
	db.Exec(t, "INSERT INTO outbox_messages (topic, business_key, payload) VALUES ($1, 'order-43', '{}')", missing)

	p, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	relaytest.Start(t, db, relaytest.Config(p))

	msgs := readStream(t, js, stream, 2, 30*time.Second)
	ids := map[string]string{} // payload → message_id in the table
	rows, err := db.Pool.Query(context.Background(), "SELECT payload, message_id FROM outbox_messages WHERE topic = $1", topic)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var payload, id string
		if err := rows.Scan(&payload, &id); err != nil {
			t.Fatal(err)
		}
		ids[payload] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		h := m.Headers()
		payload := string(m.Data())
		want := map[string]string{
			jetstream.MsgIDHeader:    ids[payload],
			outbox.HeaderTopic:       topic,
			outbox.HeaderContentType: "application/json",
		}
		switch payload {
		case `{"order_id":42}`:
			want[outbox.HeaderBusinessKey] = "order-42"
		case "plain text":
			want[outbox.HeaderContentType] = "text/plain"
			want["x-tenant"] = "acme"
			want[outbox.HeaderTraceParent] = traceparent
			if _, ok := h[outbox.HeaderBusinessKey]; ok {
				t.Errorf("a message without a key carries %s", outbox.HeaderBusinessKey)
			}
		default:
			t.Fatalf("unexpected payload %q", payload)
		}
		if m.Subject() != topic {
			t.Errorf("subject %q, want %q", m.Subject(), topic)
		}
		for k, v := range want {
			if got := h.Get(k); got != v || v == "" {
				t.Errorf("%q: header %s = %q, want %q", payload, k, got, v)
			}
		}
	}
	relaytest.WaitFor(t, 30*time.Second, "the rows settled", func() bool {
		return relaytest.Count(t, db, "sent") == 2 &&
			relaytest.Count(t, db, "dead") == 1
	})
	var lastError string
	if err := db.Pool.QueryRow(context.Background(), "SELECT last_error FROM outbox_messages WHERE topic = $1", missing).Scan(&lastError); err != nil {
		t.Fatal(err)
	}
	if want := `outboxnats: no JetStream stream for subject "` + missing + `"`; lastError != want {
		t.Errorf("dead row's last_error = %q, want %q", lastError, want)
	}
}
