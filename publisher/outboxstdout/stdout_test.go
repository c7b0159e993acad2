package outboxstdout_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxstdout"
)

func env(id, ct, payload string) *publisher.Envelope {
	return &publisher.Envelope{
		ID:          id,
		Topic:       "order.created",
		Key:         "order-42",
		Destination: "orders",
		Payload:     []byte(payload),
		Headers:     map[string]string{"content-type": ct, "outbox-topic": "order.created", "x-user": "a<b>&c"},
		Attempt:     3,
	}
}

func lines(t *testing.T, out []byte) []map[string]json.RawMessage {
	t.Helper()
	var res []map[string]json.RawMessage
	for i, l := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("line %d %q is not a JSON object: %v", i, l, err)
		}
		res = append(res, m)
	}
	return res
}

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a JSON string", raw)
	}
	return s
}

func TestLines(t *testing.T) {
	t.Parallel()
	binary := []byte{0, 1, 0xfe, 0xff, '\n'}
	batch := []*publisher.Envelope{
		env("id-json", "application/json", "{\n  \"order_id\": 42,\n  \"note\": \"x\"\n}"),
		env("id-cloudevents", "application/cloudevents+json; charset=utf-8", `[1,2]`),
		env("id-badjson", "application/json", `{not json`),
		env("id-text", "text/plain", "hello\nworld"),
		env("id-binary", "application/octet-stream", string(binary)),
		{ID: "id-bare", Topic: "t", Destination: "t", Payload: []byte(`{"a":true}`), Attempt: 1},
	}
	var buf bytes.Buffer
	p := outboxstdout.New(&buf)
	for i, err := range p.Publish(t.Context(), batch) {
		if err != nil {
			t.Fatalf("result %d: %v", i, err)
		}
	}
	got := lines(t, buf.Bytes())
	if len(got) != len(batch) {
		t.Fatalf("%d lines for %d messages:\n%s", len(got), len(batch), buf.Bytes())
	}
	for i, m := range got {
		e := batch[i]
		if str(t, m["message_id"]) != e.ID || str(t, m["topic"]) != e.Topic || str(t, m["destination"]) != e.Destination {
			t.Errorf("line %d: ids/topic/destination = %s %s %s", i, m["message_id"], m["topic"], m["destination"])
		}
		if n, _ := strconv.Atoi(string(m["attempt"])); n != e.Attempt {
			t.Errorf("line %d: attempt = %s, want %d", i, m["attempt"], e.Attempt)
		}
		key, hasKey := m["business_key"]
		switch {
		case e.Key == "" && hasKey:
			t.Errorf("line %d: business_key %s present for an empty key", i, key)
		case e.Key != "" && (!hasKey || str(t, key) != e.Key):
			t.Errorf("line %d: business_key = %s, want %q", i, key, e.Key)
		}
		var headers map[string]string
		if err := json.Unmarshal(m["headers"], &headers); err != nil || headers == nil {
			t.Errorf("line %d: headers = %s, want an object", i, m["headers"])
		}
		for k, v := range e.Headers {
			if headers[k] != v {
				t.Errorf("line %d: header %s = %q, want %q", i, k, headers[k], v)
			}
		}
	}
	// Payload rendering.
	if got, want := string(got[0]["payload"]), `{"order_id":42,"note":"x"}`; got != want {
		t.Errorf("JSON payload = %s, want %s (embedded, compact)", got, want)
	}
	if got := string(got[1]["payload"]); got != `[1,2]` {
		t.Errorf("+json payload = %s, want embedded", got)
	}
	if got := str(t, got[2]["payload"]); got != `{not json` {
		t.Errorf("invalid JSON payload = %q, want it as a string", got)
	}
	if got := str(t, got[3]["payload"]); got != "hello\nworld" {
		t.Errorf("text payload = %q", got)
	}
	b64 := str(t, got[4]["payload"])
	if dec, err := base64.StdEncoding.DecodeString(b64); err != nil || !bytes.Equal(dec, binary) || str(t, got[4]["payload_encoding"]) != "base64" {
		t.Errorf("binary payload = %q, encoding %s; want base64 of the bytes", b64, got[4]["payload_encoding"])
	}
	if _, ok := got[0]["payload_encoding"]; ok {
		t.Error("payload_encoding present on a JSON payload")
	}
	if got := string(got[5]["payload"]); got != `{"a":true}` {
		t.Errorf("payload without content-type = %s, want embedded JSON (the default type)", got)
	}
	if got := string(got[5]["headers"]); got != `{}` {
		t.Errorf("nil headers = %s, want {}", got)
	}
}

// lineWriter records each Write call separately.
type lineWriter struct {
	mu     sync.Mutex
	writes [][]byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, append([]byte(nil), b...))
	return len(b), nil
}

func TestConcurrentBatchesDoNotInterleave(t *testing.T) {
	t.Parallel()
	w := &lineWriter{}
	p := outboxstdout.New(w)
	const goroutines, per = 16, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			batch := make([]*publisher.Envelope, per)
			for i := range batch {
				batch[i] = env("g"+strconv.Itoa(g)+"-"+strconv.Itoa(i), "application/json", `{"big":"`+strings.Repeat("x", 4096)+`"}`)
			}
			for _, err := range p.Publish(context.Background(), batch) {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if len(w.writes) != goroutines*per {
		t.Fatalf("%d writes, want one per message (%d)", len(w.writes), goroutines*per)
	}
	seen := map[string]bool{}
	for _, b := range w.writes {
		if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
			t.Fatalf("write %q is not exactly one line", b[:min(len(b), 80)])
		}
		var m struct {
			MessageID string `json:"message_id"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("write is not JSON: %v", err)
		}
		seen[m.MessageID] = true
	}
	if len(seen) != goroutines*per {
		t.Errorf("%d distinct messages written, want %d", len(seen), goroutines*per)
	}
}

// failingWriter fails the writes whose number (from 0) is in fail.
type failingWriter struct {
	n    int
	fail map[int]bool
	buf  bytes.Buffer
}

func (w *failingWriter) Write(b []byte) (int, error) {
	defer func() { w.n++ }()
	if w.fail[w.n] {
		return 0, errors.New("disk full")
	}
	return w.buf.Write(b)
}

func TestWriteErrorIsThatMessagesError(t *testing.T) {
	t.Parallel()
	w := &failingWriter{fail: map[int]bool{1: true}}
	p := outboxstdout.New(w)
	errs := p.Publish(t.Context(), []*publisher.Envelope{env("a", "application/json", `1`), env("b", "application/json", `2`), env("c", "application/json", `3`)})
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("results = %v, want only the second to fail", errs)
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "disk full") {
		t.Errorf("result 1 = %v, want the write error", errs[1])
	}
	if n := len(lines(t, w.buf.Bytes())); n != 2 {
		t.Errorf("%d lines written, want 2", n)
	}
}

// brokenWriter fails every write.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestFlushes(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	bw := bufio.NewWriterSize(&out, 1<<20)
	p := outboxstdout.New(bw)
	if errs := p.Publish(t.Context(), []*publisher.Envelope{env("a", "application/json", `1`)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if out.Len() == 0 {
		t.Error("a buffered writer was not flushed after the batch")
	}
	p = outboxstdout.New(bufio.NewWriterSize(brokenWriter{}, 1<<20))
	if errs := p.Publish(t.Context(), []*publisher.Envelope{env("a", "application/json", `1`)}); errs[0] == nil {
		t.Error("a failed flush reported success")
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := outboxstdout.New(&buf)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	errs := p.Publish(ctx, []*publisher.Envelope{env("a", "application/json", `1`)})
	if !errors.Is(errs[0], context.Canceled) || buf.Len() != 0 {
		t.Errorf("result = %v, output %q; want context.Canceled and nothing written", errs[0], buf.String())
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}
