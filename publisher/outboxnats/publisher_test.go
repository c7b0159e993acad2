package outboxnats_test

import (
	"bytes"
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxnats"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func newPublisher(t *testing.T, js jetstream.JetStream) *outboxnats.Publisher {
	t.Helper()
	p, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func env(dest, key, payload string) *outbox.Envelope {
	return publishertest.Envelope(dest, key, []byte(payload), "application/json", nil)
}

func publish(t *testing.T, p outbox.Publisher, d time.Duration, batch ...*outbox.Envelope) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	errs := p.Publish(ctx, batch)
	if len(errs) != len(batch) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(batch))
	}
	return errs
}

func wantClass(t *testing.T, what string, err error, want outbox.ErrorClass, contains string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want a %v error", what, want)
	}
	if c := outbox.Classify(err); c != want {
		t.Fatalf("%s: error %q is %v, want %v", what, err, c, want)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Fatalf("%s: error %q does not say %q", what, err, contains)
	}
	if strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("%s: error %q is not one line", what, err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := outboxnats.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	_, js := connect(t)
	if _, err := outboxnats.New(js, &outboxnats.Config{LookupTimeout: -1}); err == nil || !strings.Contains(err.Error(), "LookupTimeout") {
		t.Errorf("negative LookupTimeout: %v", err)
	}
	if _, err := outboxnats.New(js, &outboxnats.Config{ConnCheckInterval: -1}); err == nil || !strings.Contains(err.Error(), "ConnCheckInterval") {
		t.Errorf("negative ConnCheckInterval: %v", err)
	}
}

// A resend of the same message id (a retry after an unknown outcome) is a
// success, and the stream keeps one copy.
func TestDuplicateIDIsSuccess(t *testing.T) {
	t.Parallel()
	_, js := connect(t)
	p := newPublisher(t, js)
	stream := newStream(t, js, nil)
	first := env(stream+".orders", "k", `{"n":1}`)
	again := *first
	again.Attempt = 2
	for i, e := range []*outbox.Envelope{first, &again} {
		if errs := publish(t, p, 10*time.Second, e); errs[0] != nil {
			t.Fatalf("publish %d: %v", i+1, errs[0])
		}
	}
	if n := streamCount(t, js, stream); n != 1 {
		t.Fatalf("stream holds %d messages after publishing one id twice, want 1", n)
	}
	msgs := readStream(t, js, stream, 1, 10*time.Second)
	if got := msgs[0].Headers().Get(jetstream.MsgIDHeader); got != first.ID {
		t.Fatalf("Nats-Msg-Id = %q, want %q", got, first.ID)
	}
}

// What row data can get wrong is permanent, and nothing is published.
func TestInvalidMessagesArePermanent(t *testing.T) {
	t.Parallel()
	nc, js := connect(t)
	p := newPublisher(t, js)
	stream := newStream(t, js, nil)
	withHeader := func(k, v string) *outbox.Envelope {
		e := env(stream+".orders", "k", `{}`)
		e.Headers[k] = v
		return e
	}
	big := env(stream+".orders", "k", "")
	big.Payload = bytes.Repeat([]byte("x"), int(nc.MaxPayload())+1)
	noID := env(stream+".orders", "k", `{}`)
	noID.ID = ""
	for _, tc := range []struct {
		name string
		env  *outbox.Envelope
		want string
	}{
		{"blank in subject", env(stream+".order created", "k", `{}`), "blanks"},
		{"star wildcard", env(stream+".*", "k", `{}`), "wildcards"},
		{"tail wildcard", env(stream+".>", "k", `{}`), "wildcards"},
		{"empty token", env(stream+"..orders", "k", `{}`), "empty token"},
		{"leading dot", env("."+stream, "k", `{}`), "empty token"},
		{"empty subject", env("", "k", `{}`), "empty subject"},
		{"system subject", env("$JS.API.STREAM.DELETE."+stream, "k", `{}`), "$-prefixed"},
		{"too long subject", env(stream+"."+strings.Repeat("a", outboxnats.MaxSubjectLen), "k", `{}`), "longer than"},
		{"JetStream control header", withHeader("Nats-Rollup", "all"), "reserved"},
		{"lower-case control header", withHeader("nats-expected-stream", "x"), "reserved"},
		{"line break in header value", withHeader("x-note", "a\r\nInjected: 1"), "line break"},
		{"bad header name", withHeader("bad:name", "v"), "cannot be carried"},
		{"over max_payload", big, "max_payload"},
		{"no message id", noID, "no id"},
	} {
		errs := publish(t, p, 10*time.Second, tc.env)
		wantClass(t, tc.name, errs[0], outbox.ClassPermanent, tc.want)
	}
	if errs := publish(t, p, 10*time.Second, nil); outbox.Classify(errs[0]) != outbox.ClassPermanent {
		t.Errorf("nil envelope: %v, want a permanent error", errs[0])
	}
	if n := streamCount(t, js, stream); n != 0 {
		t.Fatalf("stream holds %d messages after only invalid publishes", n)
	}
}

// A batch mixing good and bad messages gets a result for each, in order.
func TestMixedBatchResultsInOrder(t *testing.T) {
	t.Parallel()
	_, js := connect(t)
	p := newPublisher(t, js)
	stream := newStream(t, js, nil)
	missing := "nostream_" + randomHex() + ".x"
	batch := []*outbox.Envelope{
		env(stream+".a", "1", `1`), env(missing, "2", `2`), env(stream+".*", "3", `3`),
		env(stream+".b", "4", `4`), env(missing, "5", `5`), env(stream+".c", "6", `6`),
	}
	errs := publish(t, p, 20*time.Second, batch...)
	for i, ok := range []bool{true, false, false, true, false, true} {
		if ok && errs[i] != nil {
			t.Errorf("message %d: %v", i, errs[i])
		}
		if !ok && outbox.Classify(errs[i]) != outbox.ClassPermanent {
			t.Errorf("message %d: %v, want a permanent error", i, errs[i])
		}
	}
	wantClass(t, "missing stream", errs[1], outbox.ClassPermanent, "no JetStream stream for subject")
	got := map[string]bool{}
	for _, m := range readStream(t, js, stream, 3, 10*time.Second) {
		got[m.Headers().Get(jetstream.MsgIDHeader)] = true
	}
	for _, i := range []int{0, 3, 5} {
		if !got[batch[i].ID] {
			t.Errorf("message %d was confirmed but is not in the stream", i)
		}
	}
}

// The stream's own max_msg_size is as permanent as the server's
// max_payload.
func TestStreamMaxMsgSizeIsPermanent(t *testing.T) {
	t.Parallel()
	_, js := connect(t)
	p := newPublisher(t, js)
	stream := newStream(t, js, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 1024 })
	e := env(stream+".orders", "k", `"`+strings.Repeat("x", 2048)+`"`)
	wantClass(t, "over max_msg_size", publish(t, p, 10*time.Second, e)[0], outbox.ClassPermanent, "max_msg_size")
}

// A full stream (limits with discard=new) refuses for now: retried, not
// dead, and not unknown.
func TestFullStreamIsTransient(t *testing.T) {
	t.Parallel()
	_, js := connect(t)
	p := newPublisher(t, js)
	stream := newStream(t, js, func(c *jetstream.StreamConfig) { c.MaxMsgs = 1; c.Discard = jetstream.DiscardNew })
	if errs := publish(t, p, 10*time.Second, env(stream+".a", "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	wantClass(t, "full stream", publish(t, p, 10*time.Second, env(stream+".a", "k", `2`))[0], outbox.ClassTransient, "JetStream refused the message")
}

// proxied connects through a fault proxy in front of the local server.
func proxied(t *testing.T) (*faultproxy.Proxy, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	connect(t) // fail or skip here when the server is missing
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fp.Close() })
	nc, js := connectTo(t, "nats://"+fp.Addr(), nats.ReconnectBufSize(-1))
	return fp, nc, js
}

// While the connection is down every message is unavailable (the relay
// pauses the route without counting attempts); once the server is back,
// the connection recovers by itself and publishing works again.
func TestUnavailableThenReconnects(t *testing.T) {
	t.Parallel()
	_, direct := connect(t)
	stream := newStream(t, direct, nil)
	fp, nc, js := proxied(t)
	p := newPublisher(t, js)
	if errs := publish(t, p, 10*time.Second, env(stream+".a", "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	fp.SetMode(faultproxy.Refuse)
	relaytest.WaitFor(t, 10*time.Second, "the client to notice the disconnect", func() bool { return !nc.IsConnected() })
	down := []*outbox.Envelope{env(stream+".a", "k1", `2`), env(stream+".b", "k2", `3`)}
	for i, err := range publish(t, p, 10*time.Second, down...) {
		wantClass(t, "publish while disconnected", err, outbox.ClassUnavailable, "not connected")
		_ = i
	}
	fp.SetMode(faultproxy.Pass)
	relaytest.WaitFor(t, 20*time.Second, "the client to reconnect", nc.IsConnected)
	if errs := publish(t, p, 10*time.Second, down...); errs[0] != nil || errs[1] != nil {
		t.Fatalf("publish after reconnect: %v", errs)
	}
	if n := streamCount(t, direct, stream); n != 3 {
		t.Fatalf("stream holds %d messages, want 3", n)
	}
}

// A server that swallows the message and never answers: the PubAck never
// comes, so the outcome is unknown, never success.
func TestNoPubAckIsUnknown(t *testing.T) {
	t.Parallel()
	_, direct := connect(t)
	stream := newStream(t, direct, nil)
	fp, _, js := proxied(t)
	p := newPublisher(t, js)
	fp.SetMode(faultproxy.Blackhole)
	for _, err := range publish(t, p, time.Second, env(stream+".a", "k1", `1`), env(stream+".b", "k2", `2`)) {
		wantClass(t, "no PubAck", err, outbox.ClassUnknown, "no PubAck")
	}
}

// A connection lost while PubAcks are awaited ends the wait at once, as
// an unknown outcome rather than a deadline.
func TestDisconnectWhileAwaitingIsUnknown(t *testing.T) {
	t.Parallel()
	_, direct := connect(t)
	stream := newStream(t, direct, nil)
	fp, _, js := proxied(t)
	p := newPublisher(t, js)
	fp.SetMode(faultproxy.Blackhole)
	done := make(chan []error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- p.Publish(ctx, []*outbox.Envelope{env(stream+".a", "k1", `1`), env(stream+".b", "k2", `2`)})
	}()
	relaytest.WaitFor(t, 10*time.Second, "the messages to be in flight", func() bool { return js.PublishAsyncPending() == 2 })
	fp.SetMode(faultproxy.Refuse)
	select {
	case errs := <-done:
		for _, err := range errs {
			wantClass(t, "disconnect while awaiting", err, outbox.ClassUnknown, "connection")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Publish kept waiting after the connection dropped")
	}
}

// A connection the caller closed is unavailable, and Close leaves a
// caller's connection alone.
func TestClosedConnection(t *testing.T) {
	t.Parallel()
	nc, js := connect(t)
	stream := newStream(t, js, nil)
	p, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !nc.IsConnected() {
		t.Fatal("Close closed the caller's connection")
	}
	wantClass(t, "publish after Close", publish(t, p, 5*time.Second, env(stream+".a", "k", `1`))[0], outbox.ClassTransient, "closed")

	p2 := newPublisher(t, js)
	nc.Close()
	wantClass(t, "closed connection", publish(t, p2, 5*time.Second, env(stream+".a", "k", `1`))[0], outbox.ClassUnavailable, "connection closed")
}

// A batch larger than the context's WithPublishAsyncMaxPending waits for
// PubAcks to free slots instead of failing.
func TestBatchLargerThanMaxPending(t *testing.T) {
	t.Parallel()
	nc, _ := connect(t)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8))
	if err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, js)
	stream := newStream(t, js, nil)
	var batch []*outbox.Envelope
	for i := range 300 {
		batch = append(batch, env(stream+".orders", "key-"+strconv.Itoa(i), strconv.Itoa(i)))
	}
	for i, err := range publish(t, p, 30*time.Second, batch...) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if n := streamCount(t, js, stream); n != 300 {
		t.Fatalf("stream holds %d messages, want 300", n)
	}
}
