package outbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestEnqueueValidation(t *testing.T) {
	h := harness.New(t, harness.Cases[3]) // validation happens before any SQL
	p, err := outbox.NewProducer(h.DB.Std, &outbox.Config{MaxPayloadBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		msg   outbox.Message
		want  error
		field string
	}{
		{"empty topic", outbox.Message{Payload: []byte(`1`)}, outbox.ErrInvalidTopic, "Topic"},
		{"topic with space", outbox.Message{Topic: "order created", Payload: []byte(`1`)}, outbox.ErrInvalidTopic, "Topic"},
		{"topic with empty segment", outbox.Message{Topic: "order..created", Payload: []byte(`1`)}, outbox.ErrInvalidTopic, "Topic"},
		{"topic with wildcard", outbox.Message{Topic: "order.*", Payload: []byte(`1`)}, outbox.ErrInvalidTopic, "Topic"},
		{"topic too long", outbox.Message{Topic: strings.Repeat("a", 256), Payload: []byte(`1`)}, outbox.ErrInvalidTopic, "Topic"},
		{"key too long", outbox.Message{Topic: "a", Key: strings.Repeat("k", 256), Payload: []byte(`1`)}, outbox.ErrInvalidKey, "Key"},
		{"payload too large", outbox.Message{Topic: "a", Payload: []byte(`"` + strings.Repeat("x", 70) + `"`)}, outbox.ErrPayloadTooLarge, "Payload"},
		{"invalid json", outbox.Message{Topic: "a", Payload: []byte(`{"a":`)}, outbox.ErrInvalidJSON, "Payload"},
		{"invalid json with +json type", outbox.Message{Topic: "a", ContentType: "application/cloudevents+json", Payload: []byte(`nope`)}, outbox.ErrInvalidJSON, "Payload"},
		{"reserved header", outbox.Message{Topic: "a", Payload: []byte(`1`), Headers: map[string]string{"outbox-topic": "x"}}, outbox.ErrInvalidHeader, "Headers"},
		{"header name with colon", outbox.Message{Topic: "a", Payload: []byte(`1`), Headers: map[string]string{"a:b": "x"}}, outbox.ErrInvalidHeader, "Headers"},
		{"bad content type", outbox.Message{Topic: "a", Payload: []byte(`1`), ContentType: "///"}, outbox.ErrInvalidHeader, "ContentType"},
		{"bad id", outbox.Message{Topic: "a", Payload: []byte(`1`), ID: "42"}, outbox.ErrInvalidMessage, "ID"},
		{"negative delay", outbox.Message{Topic: "a", Payload: []byte(`1`), Delay: -time.Second}, outbox.ErrInvalidMessage, "Delay"},
		{"negative ttl", outbox.Message{Topic: "a", Payload: []byte(`1`), TTL: -time.Second}, outbox.ErrInvalidMessage, "TTL"},
		{"ttl and expires at", outbox.Message{Topic: "a", Payload: []byte(`1`), TTL: time.Minute, ExpiresAt: time.Now().Add(time.Hour)}, outbox.ErrInvalidMessage, "TTL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx, err := h.DB.SQL.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			_, err = p.EnqueueMany(context.Background(), tx, []outbox.Message{{Topic: "ok", Payload: []byte(`1`)}, c.msg})
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var ve *outbox.ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field || ve.Index != 1 {
				t.Fatalf("got %#v, want field %s at index 1", err, c.field)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
	if n := h.DB.Count(t, "SELECT count(*) FROM outbox_messages"); n != 0 {
		t.Fatalf("%d rows written by rejected calls", n)
	}
}

// A rejected message leaves the caller's PostgreSQL transaction usable.
func TestRejectedMessageDoesNotPoisonTransaction(t *testing.T) {
	for _, c := range harness.Cases[:2] {
		t.Run(c.Name, func(t *testing.T) {
			h := harness.New(t, c)
			ctx := context.Background()
			h.DB.Exec(t, "CREATE TABLE orders (id int PRIMARY KEY)")
			check := func(enqueue func(m outbox.Message) (string, error), exec func(q string) error, commit func() error) {
				if err := exec("INSERT INTO orders VALUES (1)"); err != nil {
					t.Fatal(err)
				}
				if _, err := enqueue(outbox.Message{Topic: "", Payload: []byte(`1`)}); !errors.Is(err, outbox.ErrInvalidTopic) {
					t.Fatalf("want ErrInvalidTopic, got %v", err)
				}
				if _, err := enqueue(outbox.Message{Topic: "order.created", Payload: []byte(`{"id":1}`)}); err != nil {
					t.Fatalf("enqueue after a rejected message: %v", err)
				}
				if err := commit(); err != nil {
					t.Fatalf("commit after a rejected message: %v", err)
				}
			}
			if c.PGX {
				p, _ := outbox.NewProducer(h.DB.PGX, nil)
				tx, err := h.DB.Pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				check(func(m outbox.Message) (string, error) { return p.Enqueue(ctx, tx, m) },
					func(q string) error { _, err := tx.Exec(ctx, q); return err },
					func() error { return tx.Commit(ctx) })
			} else {
				p, _ := outbox.NewProducer(h.DB.Std, nil)
				tx, err := h.DB.SQL.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				check(func(m outbox.Message) (string, error) { return p.Enqueue(ctx, tx, m) },
					func(q string) error { _, err := tx.ExecContext(ctx, q); return err },
					func() error { return tx.Commit() })
			}
			if n := h.DB.Count(t, "SELECT count(*) FROM orders") + h.DB.Count(t, "SELECT count(*) FROM outbox_messages"); n != 2 {
				t.Fatalf("want the order and its message committed, got %d rows", n)
			}
		})
	}
}

func TestDuplicateMessageID(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		id := "0192f0c4-3a6e-7cc4-9a3b-1f2e3d4c5b6a"
		enqueue(t, h, context.Background(), []outbox.Message{{Topic: "a", Payload: []byte(`1`), ID: strings.ToUpper(id)}})
		_, err := h.Enqueue(context.Background(), []outbox.Message{{Topic: "a", Payload: []byte(`2`), ID: id}}, false)
		if !errors.Is(err, outbox.ErrDuplicateMessageID) {
			t.Fatalf("want ErrDuplicateMessageID, got %v", err)
		}
		if n := h.DB.Count(t, "SELECT count(*) FROM outbox_messages WHERE message_id = '"+id+"'"); n != 1 {
			t.Fatalf("%d rows with the id (stored lower case)", n)
		}
	})
}

func TestEnvelopeCarriesPayloadHeadersAndTrace(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		s := newSink()
		r := newRelay(t, h, harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(s.publish), Destination: "orders"}))
		traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
		spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
		binary := []byte{0, 1, 2, 0xff, 0xfe, 'a', 0}
		in := []outbox.Message{
			{Topic: "order.created", Key: "order-7", Payload: []byte(`{"id": 7,  "x":"ü"}`), Headers: map[string]string{"X-Tenant": "acme"}},
			{Topic: "blob.stored", Payload: binary, ContentType: "application/octet-stream"},
			{Topic: "note.text", Payload: []byte("plain text ✓"), ContentType: "text/plain; charset=utf-8"},
		}
		ids := enqueue(t, h, ctx, in)
		relaytest.Run(t, r)
		relaytest.WaitFor(t, 20*time.Second, "3 deliveries", func() bool { return s.distinct() == 3 })
		s.mu.Lock()
		defer s.mu.Unlock()
		byID := map[string]*outbox.Envelope{}
		for _, e := range s.got {
			byID[e.ID] = e
		}
		for i, m := range in {
			e := byID[ids[i]]
			if e == nil {
				t.Fatalf("message %d missing", i)
			}
			if !bytes.Equal(e.Payload, m.Payload) {
				t.Errorf("%s: payload %q, want %q", m.Topic, e.Payload, m.Payload)
			}
			if e.Destination != "orders" || e.Topic != m.Topic || e.Headers["outbox-topic"] != m.Topic || e.Attempt != 1 {
				t.Errorf("%s: envelope %+v", m.Topic, e)
			}
			if got := e.Headers["traceparent"]; got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
				t.Errorf("%s: traceparent %q", m.Topic, got)
			}
			if _, ok := e.Headers["content-transfer-encoding"]; ok {
				t.Errorf("%s: transfer encoding leaked onto the wire", m.Topic)
			}
			if e.CreatedAt.IsZero() {
				t.Errorf("%s: no created_at", m.Topic)
			}
		}
		e := byID[ids[0]]
		if e.Key != "order-7" || e.Headers["outbox-business-key"] != "order-7" || e.Headers["x-tenant"] != "acme" || e.Headers["content-type"] != "application/json" {
			t.Errorf("headers %v", e.Headers)
		}
		if ct := byID[ids[1]].Headers["content-type"]; ct != "application/octet-stream" {
			t.Errorf("binary content type %q", ct)
		}
	})
}

// TestTTL: Config.TTL expires the messages that set no expiry of their
// own, by the database clock; Message.TTL and ExpiresAt win over it. On
// every database, and through pgx's batch (one round trip).
func TestTTL(t *testing.T) {
	msgs := []outbox.Message{
		{Topic: "ttl.default", Payload: []byte(`1`)},
		{Topic: "ttl.own", Payload: []byte(`2`), TTL: 2 * time.Hour},
		{Topic: "ttl.at", Payload: []byte(`3`), ExpiresAt: time.Now().Add(3 * time.Hour)},
	}
	check := func(t *testing.T, db *testdb.DB) {
		for topic, hours := range map[string]int{"ttl.default": 1, "ttl.own": 2, "ttl.at": 3} {
			in := time.Duration(hours) * time.Hour
			q := "SELECT count(*) FROM outbox_messages WHERE topic = '" + topic + "' AND expires_at > " + testdb.Ago(db.Dialect, -in+time.Minute) + " AND expires_at < " + testdb.Ago(db.Dialect, -in-time.Minute)
			if n := db.Count(t, q); n != 1 {
				t.Errorf("%s: expires_at is not about %d h ahead", topic, hours)
			}
		}
	}
	cfg := &outbox.Config{TTL: time.Hour}
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, d)
			p, err := outbox.NewProducer(db.Std, cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Std.InTx(context.Background(), func(tx *sql.Tx) error {
				_, err := p.EnqueueMany(context.Background(), tx, msgs)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			check(t, db)
		})
	}
	t.Run("pgx batch", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t, store.Postgres)
		p, err := outbox.NewProducer(db.PGX.Batched(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = db.PGX.Batched().InTx(context.Background(), func(b *pgx.Batch) error {
			_, err := p.EnqueueMany(context.Background(), b, msgs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		check(t, db)
	})
	if _, err := outbox.NewProducer(testdb.New(t, store.SQLite).Std, &outbox.Config{TTL: -time.Second}); err == nil || !strings.Contains(err.Error(), "Config.TTL") {
		t.Errorf("a negative Config.TTL: %v", err)
	}
}
