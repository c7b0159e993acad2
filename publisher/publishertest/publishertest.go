// Package publishertest is the conformance suite every outbox publisher
// passes: ids, headers and byte-identical payloads arrive, batches get one
// result per message, per-key order holds across batches, a cancelled
// publish never reports success, missing destinations are permanent
// errors, and Close is final.
//
// A publisher's own test builds a Target over the real broker and calls
// Run:
//
//	func TestConformance(t *testing.T) {
//		publishertest.Run(t, func(t *testing.T) *publishertest.Target { … })
//	}
package publishertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
)

// Received is a message as a consumer of the destination sees it.
type Received struct {
	ID          string
	Key         string
	Topic       string
	Destination string
	Payload     []byte
	Headers     map[string]string
}

// Features says what the destination promises beyond the common core.
type Features struct {
	// Keys: the business key arrives as the broker's own key (Kafka) or a
	// header; Received.Key is filled.
	Keys bool
	// ArbitraryHeaders: user headers arrive as headers.
	ArbitraryHeaders bool
	// MissingDestinationIsPermanent: publishing to a destination that does
	// not exist fails with a permanent error.
	MissingDestinationIsPermanent bool
	// ReceiveTimeout bounds Receive. Defaults to 20 s.
	ReceiveTimeout time.Duration
}

// Target is a publisher under test and the means to see what it delivered.
type Target struct {
	Publisher outbox.Publisher
	// NewDestination creates a fresh destination (topic, stream, queue
	// binding…) and returns the name to publish to.
	NewDestination func(t *testing.T) string
	// MissingDestination returns a valid name for which no destination
	// exists. Needed only with Features.MissingDestinationIsPermanent.
	MissingDestination func(t *testing.T) string
	// Receive returns the first n messages that arrived at dest, in
	// arrival order, failing the test if they do not come in time.
	Receive  func(t *testing.T, dest string, n int) []Received
	Features Features
}

// Run runs the suite; newTarget is called once per subtest.
func Run(t *testing.T, newTarget func(t *testing.T) *Target) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, tg *Target)
	}{
		{"ContentArrivesIntact", contentArrivesIntact},
		{"OneResultPerMessage", oneResultPerMessage},
		{"OrderPerKeyAcrossBatches", orderPerKey},
		{"CancelledPublishIsNeverSuccess", cancelledIsNotSuccess},
		{"MissingDestination", missingDestination},
		{"CloseIsFinal", closeIsFinal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t)
			if tg.Features.ReceiveTimeout == 0 {
				tg.Features.ReceiveTimeout = 20 * time.Second
			}
			tc.fn(t, tg)
		})
	}
}

// NewID returns a fresh message id.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Envelope builds an envelope as the relay would.
func Envelope(dest, key string, payload []byte, contentType string, extra map[string]string) *outbox.Envelope {
	h := map[string]string{outbox.HeaderTopic: "conformance.test", outbox.HeaderContentType: contentType}
	if key != "" {
		h[outbox.HeaderBusinessKey] = key
	}
	for k, v := range extra {
		h[k] = v
	}
	return &outbox.Envelope{ID: NewID(), Topic: "conformance.test", Key: key, Destination: dest, Payload: payload, Headers: h, Attempt: 1, CreatedAt: time.Now()}
}

func publishOK(t *testing.T, p outbox.Publisher, batch []*outbox.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := p.Publish(ctx, batch)
	if len(errs) != len(batch) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(batch))
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("message %d (%s): %v", i, batch[i].ID, err)
		}
	}
}

func contentArrivesIntact(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	batch := []*outbox.Envelope{
		Envelope(dest, "k-json", []byte(`{"order_id":42,"name":"Zoë","nested":{"a":[1,2,3]}}`), "application/json", map[string]string{"x-tenant": "acme", outbox.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
		Envelope(dest, "k-binary", binary, "application/octet-stream", nil),
		Envelope(dest, "", []byte("plain text, no key"), "text/plain", nil),
		Envelope(dest, "k-big", bytes.Repeat([]byte("x"), 200<<10), "text/plain", nil),
	}
	publishOK(t, tg.Publisher, batch)
	got := tg.Receive(t, dest, len(batch))
	byID := map[string]Received{}
	for _, r := range got {
		byID[r.ID] = r
	}
	for _, env := range batch {
		r, ok := byID[env.ID]
		if !ok {
			t.Fatalf("message %s did not arrive (or its id was lost); got %d messages", env.ID, len(got))
		}
		if !bytes.Equal(r.Payload, env.Payload) {
			t.Errorf("%s: payload differs (%d bytes, want %d)", env.ID, len(r.Payload), len(env.Payload))
		}
		if tg.Features.Keys && r.Key != env.Key {
			t.Errorf("%s: key %q, want %q", env.ID, r.Key, env.Key)
		}
		for _, h := range []string{outbox.HeaderTopic, outbox.HeaderContentType} {
			if r.Headers[h] != env.Headers[h] {
				t.Errorf("%s: header %s = %q, want %q", env.ID, h, r.Headers[h], env.Headers[h])
			}
		}
		if env.Key != "" && r.Headers[outbox.HeaderBusinessKey] != env.Key {
			t.Errorf("%s: header %s = %q, want %q", env.ID, outbox.HeaderBusinessKey, r.Headers[outbox.HeaderBusinessKey], env.Key)
		}
	}
	first := byID[batch[0].ID]
	if got := first.Headers[outbox.HeaderTraceParent]; got != batch[0].Headers[outbox.HeaderTraceParent] {
		t.Errorf("traceparent = %q", got)
	}
	if tg.Features.ArbitraryHeaders && first.Headers["x-tenant"] != "acme" {
		t.Errorf("user header x-tenant = %q", first.Headers["x-tenant"])
	}
}

func oneResultPerMessage(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	var batch []*outbox.Envelope
	for i := 0; i < 300; i++ {
		batch = append(batch, Envelope(dest, fmt.Sprintf("key-%d", i), fmt.Appendf(nil, `{"i":%d}`, i), "application/json", nil))
	}
	publishOK(t, tg.Publisher, batch)
	got := tg.Receive(t, dest, len(batch))
	seen := map[string]bool{}
	for _, r := range got {
		seen[r.ID] = true
	}
	for _, env := range batch {
		if !seen[env.ID] {
			t.Fatalf("confirmed message %s never arrived", env.ID)
		}
	}
}

// orderPerKey publishes, as the relay does, one message per key per batch,
// batch after batch; each key's messages must arrive in order.
func orderPerKey(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	const keys, rounds = 8, 12
	for r := 0; r < rounds; r++ {
		var batch []*outbox.Envelope
		for k := 0; k < keys; k++ {
			batch = append(batch, Envelope(dest, fmt.Sprintf("key-%d", k), fmt.Appendf(nil, `{"k":%d,"seq":%d}`, k, r), "application/json", nil))
		}
		publishOK(t, tg.Publisher, batch)
	}
	got := tg.Receive(t, dest, keys*rounds)
	last := map[string]int{}
	for _, r := range got {
		var k, seq int
		if _, err := fmt.Sscanf(string(r.Payload), `{"k":%d,"seq":%d}`, &k, &seq); err != nil {
			t.Fatalf("payload %q: %v", r.Payload, err)
		}
		key := fmt.Sprint(k)
		if prev, ok := last[key]; ok && seq <= prev {
			t.Fatalf("key %d: seq %d arrived after %d", k, seq, prev)
		}
		last[key] = seq
	}
}

func cancelledIsNotSuccess(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	batch := []*outbox.Envelope{Envelope(dest, "a", []byte(`1`), "application/json", nil), Envelope(dest, "b", []byte(`2`), "application/json", nil)}
	errs := tg.Publisher.Publish(ctx, batch)
	if len(errs) != len(batch) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(batch))
	}
	for i, err := range errs {
		if err == nil {
			// Success is allowed only if the message truly arrived.
			got := tg.Receive(t, dest, i+1)
			found := false
			for _, r := range got {
				found = found || r.ID == batch[i].ID
			}
			if !found {
				t.Fatalf("message %d reported delivered under a cancelled context but never arrived", i)
			}
		}
	}
}

func missingDestination(t *testing.T, tg *Target) {
	if !tg.Features.MissingDestinationIsPermanent {
		t.Skip("the destination creates what it is sent to, or has no such notion")
	}
	dest := tg.MissingDestination(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := tg.Publisher.Publish(ctx, []*outbox.Envelope{Envelope(dest, "k", []byte(`1`), "application/json", nil)})
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("publishing to a missing destination succeeded: %v", errs)
	}
	if c := outbox.Classify(errs[0]); c != outbox.ClassPermanent {
		t.Fatalf("missing destination error %q is %v, want permanent", errs[0], c)
	}
}

func closeIsFinal(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	publishOK(t, tg.Publisher, []*outbox.Envelope{Envelope(dest, "k", []byte(`1`), "application/json", nil)})
	if err := tg.Publisher.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := tg.Publisher.Publish(ctx, []*outbox.Envelope{Envelope(dest, "k", []byte(`2`), "application/json", nil)})
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("Publish after Close succeeded")
	}
}
