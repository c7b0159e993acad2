// Package publishertest is the conformance suite every outbox publisher
// passes: ids, headers and byte-identical payloads arrive, batches get one
// result per message, per-key order holds across batches, a cancelled
// publish never reports success, missing destinations are permanent
// errors, a lost connection is never reported as delivered and heals by
// itself, and Close is final.
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
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/publisher"
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
	// Unordered: the destination keeps no order at all (a standard SQS
	// queue, and an SNS topic delivering to one); OrderPerKeyAcrossBatches
	// then checks only that every message arrives.
	Unordered bool
	// ReceiveTimeout bounds Receive. Defaults to 20 s.
	ReceiveTimeout time.Duration
}

// Target is a publisher under test and the means to see what it delivered.
type Target struct {
	Publisher publisher.Publisher
	// NewDestination creates a fresh destination (topic, stream, queue
	// binding…) and returns the name to publish to.
	NewDestination func(t *testing.T) string
	// MissingDestination returns a valid name for which no destination
	// exists. Needed only with Features.MissingDestinationIsPermanent.
	MissingDestination func(t *testing.T) string
	// Receive returns the first n messages that arrived at dest, in
	// arrival order, failing the test if they do not come in time.
	Receive func(t *testing.T, dest string, n int) []Received
	// Disconnect cuts the publisher's connection to the destination:
	// open connections are closed and new ones refused until restore is
	// called, after which the destination is reachable again at the same
	// address. Receive need only work once restore has been called.
	// Required: every publisher must survive a lost connection without
	// being rebuilt.
	Disconnect func(t *testing.T) (restore func())
	Features   Features
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
		{"ReconnectsAfterConnectionLoss", reconnects},
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
func Envelope(dest, key string, payload []byte, contentType string, extra map[string]string) *publisher.Envelope {
	h := map[string]string{publisher.HeaderTopic: "conformance.test", publisher.HeaderContentType: contentType}
	if key != "" {
		h[publisher.HeaderBusinessKey] = key
	}
	for k, v := range extra {
		h[k] = v
	}
	return &publisher.Envelope{ID: NewID(), Topic: "conformance.test", Key: key, Destination: dest, Payload: payload, Headers: h, Attempt: 1, CreatedAt: time.Now()}
}

// Publish publishes batch within d and returns its results, failing the
// test unless there is one per message.
func Publish(t testing.TB, p publisher.Publisher, d time.Duration, batch ...*publisher.Envelope) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	errs := p.Publish(ctx, batch)
	if len(errs) != len(batch) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(batch))
	}
	return errs
}

// WantClass fails the test unless err is an error of class want, on one
// line, that says each of contains; what names the call that returned it.
func WantClass(t testing.TB, what string, err error, want publisher.ErrorClass, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want a %v error", what, want)
	}
	if got := publisher.Classify(err); got != want {
		t.Fatalf("%s: error %q is %v, want %v", what, err, got, want)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%s: error %q does not say %q", what, err, s)
		}
	}
	if strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("%s: error %q is not one line", what, err)
	}
}

func publishOK(t *testing.T, p publisher.Publisher, batch []*publisher.Envelope) {
	t.Helper()
	errs := Publish(t, p, 30*time.Second, batch...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("message %d (%s): %v", i, batch[i].ID, err)
		}
	}
}

// deliver publishes batch to dest, every message confirmed, and returns
// what arrived there by message id.
func deliver(t *testing.T, tg *Target, dest string, batch []*publisher.Envelope) map[string]Received {
	t.Helper()
	publishOK(t, tg.Publisher, batch)
	byID := map[string]Received{}
	for _, r := range tg.Receive(t, dest, len(batch)) {
		byID[r.ID] = r
	}
	return byID
}

func contentArrivesIntact(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	batch := []*publisher.Envelope{
		Envelope(dest, "k-json", []byte(`{"order_id":42,"name":"Zoë","nested":{"a":[1,2,3]}}`), "application/json", map[string]string{"x-tenant": "acme", publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
		Envelope(dest, "k-binary", binary, "application/octet-stream", nil),
		Envelope(dest, "", []byte("plain text, no key"), "text/plain", nil),
		Envelope(dest, "k-big", bytes.Repeat([]byte("x"), 200<<10), "text/plain", nil),
	}
	byID := deliver(t, tg, dest, batch)
	for _, env := range batch {
		r, ok := byID[env.ID]
		if !ok {
			t.Fatalf("message %s did not arrive (or its id was lost); got %d distinct ids", env.ID, len(byID))
		}
		if !bytes.Equal(r.Payload, env.Payload) {
			t.Errorf("%s: payload differs (%d bytes, want %d)", env.ID, len(r.Payload), len(env.Payload))
		}
		if tg.Features.Keys && r.Key != env.Key {
			t.Errorf("%s: key %q, want %q", env.ID, r.Key, env.Key)
		}
		for _, h := range []string{publisher.HeaderTopic, publisher.HeaderContentType} {
			if r.Headers[h] != env.Headers[h] {
				t.Errorf("%s: header %s = %q, want %q", env.ID, h, r.Headers[h], env.Headers[h])
			}
		}
		if env.Key != "" && r.Headers[publisher.HeaderBusinessKey] != env.Key {
			t.Errorf("%s: header %s = %q, want %q", env.ID, publisher.HeaderBusinessKey, r.Headers[publisher.HeaderBusinessKey], env.Key)
		}
	}
	first := byID[batch[0].ID]
	if got := first.Headers[publisher.HeaderTraceParent]; got != batch[0].Headers[publisher.HeaderTraceParent] {
		t.Errorf("traceparent = %q", got)
	}
	if tg.Features.ArbitraryHeaders && first.Headers["x-tenant"] != "acme" {
		t.Errorf("user header x-tenant = %q", first.Headers["x-tenant"])
	}
}

func oneResultPerMessage(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	var batch []*publisher.Envelope
	for i := 0; i < 300; i++ {
		batch = append(batch, Envelope(dest, fmt.Sprintf("key-%d", i), fmt.Appendf(nil, `{"i":%d}`, i), "application/json", nil))
	}
	got := deliver(t, tg, dest, batch)
	for _, env := range batch {
		if _, ok := got[env.ID]; !ok {
			t.Fatalf("confirmed message %s never arrived", env.ID)
		}
	}
}

// orderPerKey publishes, as the relay does, one message per key per batch,
// batch after batch; each key's messages must arrive in order, unless the
// destination keeps none.
func orderPerKey(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	const keys, rounds = 8, 12
	for r := 0; r < rounds; r++ {
		var batch []*publisher.Envelope
		for k := 0; k < keys; k++ {
			batch = append(batch, Envelope(dest, fmt.Sprintf("key-%d", k), fmt.Appendf(nil, `{"k":%d,"seq":%d}`, k, r), "application/json", nil))
		}
		publishOK(t, tg.Publisher, batch)
	}
	got := tg.Receive(t, dest, keys*rounds)
	last := map[int]int{}
	seen := map[[2]int]bool{}
	for _, r := range got {
		var k, seq int
		if _, err := fmt.Sscanf(string(r.Payload), `{"k":%d,"seq":%d}`, &k, &seq); err != nil {
			t.Fatalf("payload %q: %v", r.Payload, err)
		}
		if seen[[2]int{k, seq}] {
			t.Fatalf("key %d: seq %d arrived twice", k, seq)
		}
		seen[[2]int{k, seq}] = true
		if prev, ok := last[k]; ok && seq < prev && !tg.Features.Unordered {
			t.Fatalf("key %d: seq %d arrived after %d", k, seq, prev)
		}
		last[k] = seq
	}
}

func cancelledIsNotSuccess(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	batch := []*publisher.Envelope{Envelope(dest, "a", []byte(`1`), "application/json", nil), Envelope(dest, "b", []byte(`2`), "application/json", nil)}
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
	errs := tg.Publisher.Publish(ctx, []*publisher.Envelope{Envelope(dest, "k", []byte(`1`), "application/json", nil)})
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("publishing to a missing destination succeeded: %v", errs)
	}
	if c := publisher.Classify(errs[0]); c != publisher.ClassPermanent {
		t.Fatalf("missing destination error %q is %v, want permanent", errs[0], c)
	}
}

// reconnects cuts the connection under a publisher that has delivered:
// while it is cut nothing is reported delivered that did not arrive and
// no failure is permanent; once it is restored the same publisher
// delivers again without being rebuilt.
func reconnects(t *testing.T, tg *Target) {
	if tg.Disconnect == nil {
		t.Fatal("Target.Disconnect is required")
	}
	dest := tg.NewDestination(t)
	first := Envelope(dest, "k", []byte(`{"n":0}`), "application/json", nil)
	publishOK(t, tg.Publisher, []*publisher.Envelope{first})
	tg.Receive(t, dest, 1)

	restore := tg.Disconnect(t)
	restored := false
	defer func() {
		if !restored {
			restore()
		}
	}()
	var down []*publisher.Envelope
	for i := range 3 {
		down = append(down, Envelope(dest, fmt.Sprintf("k-%d", i), fmt.Appendf(nil, `{"n":%d}`, i+1), "application/json", nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	errs := tg.Publisher.Publish(ctx, down)
	cancel()
	if len(errs) != len(down) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(down))
	}
	var confirmed []string // reported delivered while disconnected
	for i, err := range errs {
		if err == nil {
			t.Logf("message %d reported delivered while disconnected", i)
			confirmed = append(confirmed, down[i].ID)
			continue
		}
		c := publisher.Classify(err)
		t.Logf("message %d while disconnected: %v (%v)", i, err, c)
		if c == publisher.ClassPermanent {
			t.Fatalf("message %d while disconnected: %q is permanent, want unavailable, unknown or transient", i, err)
		}
	}
	restore()
	restored = true

	var last *publisher.Envelope
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for {
		last = Envelope(dest, "k", []byte(`{"n":"after"}`), "application/json", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs := tg.Publisher.Publish(ctx, []*publisher.Envelope{last})
		cancel()
		if len(errs) != 1 {
			t.Fatalf("Publish returned %d results for 1 message", len(errs))
		}
		if errs[0] == nil {
			t.Logf("delivering again %v after the connection was restored", time.Since(start).Round(time.Millisecond))
			break
		}
		if c := publisher.Classify(errs[0]); c == publisher.ClassPermanent {
			t.Fatalf("publish after the connection was restored: %q is permanent", errs[0])
		}
		if time.Now().After(deadline) {
			t.Fatalf("the publisher did not reconnect within 30 s of the connection being restored: %v", errs[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	// What failed may have arrived too (and some brokers deliver twice),
	// so the confirmed messages are somewhere after the first.
	arrived(t, tg, dest, append(confirmed, last.ID), 1+len(confirmed)+1)
}

// arrived fails the test unless every id arrived at dest. It reads the
// first n messages for n from least up until all ids are among them; a
// confirmed message that never arrived makes Receive fail once n passes
// the number of messages that did.
func arrived(t *testing.T, tg *Target, dest string, ids []string, least int) {
	t.Helper()
	t.Logf("looking for confirmed messages %v at %s", ids, dest)
	for n := least; ; n++ {
		seen := map[string]bool{}
		for _, r := range tg.Receive(t, dest, n) {
			seen[r.ID] = true
		}
		all := true
		for _, id := range ids {
			all = all && seen[id]
		}
		if all {
			return
		}
	}
}

func closeIsFinal(t *testing.T, tg *Target) {
	dest := tg.NewDestination(t)
	publishOK(t, tg.Publisher, []*publisher.Envelope{Envelope(dest, "k", []byte(`1`), "application/json", nil)})
	if err := tg.Publisher.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := tg.Publisher.Publish(ctx, []*publisher.Envelope{Envelope(dest, "k", []byte(`2`), "application/json", nil)})
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("Publish after Close succeeded")
	}
}
