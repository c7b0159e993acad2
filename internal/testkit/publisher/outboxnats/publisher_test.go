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

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxnats"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// publisherOn is a JetStream context on the local NATS, a publisher over
// it and a fresh stream to publish into, created with tweak applied to its configuration (if not
// nil).
func publisherOn(t testing.TB, tweak func(*jetstream.StreamConfig)) (jetstream.JetStream, *outboxnats.Publisher, string) {
	t.Helper()
	_, js := connect(t)
	return js, newPublisher(t, js), newStream(t, js, tweak)
}

func newPublisher(t testing.TB, js jetstream.JetStream) *outboxnats.Publisher {
	t.Helper()
	p, err := outboxnats.New(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func env(dest, key, payload string) *publisher.Envelope {
	return publishertest.Envelope(dest, key, []byte(payload), "application/json", nil)
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
	js, p, stream := publisherOn(t, nil)
	first := env(stream+".orders", "k", `{"n":1}`)
	again := *first
	again.Attempt = 2
	for i, e := range []*publisher.Envelope{first, &again} {
		if errs := publishertest.Publish(t, p, 10*time.Second, e); errs[0] != nil {
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
	withHeader := func(k, v string) *publisher.Envelope {
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
		env  *publisher.Envelope
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
		errs := publishertest.Publish(t, p, 10*time.Second, tc.env)
		publishertest.WantClass(t, tc.name, errs[0], publisher.ClassPermanent, tc.want)
	}
	if errs := publishertest.Publish(t, p, 10*time.Second, nil); publisher.Classify(errs[0]) != publisher.ClassPermanent {
		t.Errorf("nil envelope: %v, want a permanent error", errs[0])
	}
	if n := streamCount(t, js, stream); n != 0 {
		t.Fatalf("stream holds %d messages after only invalid publishes", n)
	}
}

// A batch mixing good and bad messages gets a result for each, in order.
func TestMixedBatchResultsInOrder(t *testing.T) {
	t.Parallel()
	js, p, stream := publisherOn(t, nil)
	missing := testdb.RandomName("nostream_") + ".x"
	batch := []*publisher.Envelope{
		env(stream+".a", "1", `1`), env(missing, "2", `2`), env(stream+".*", "3", `3`),
		env(stream+".b", "4", `4`), env(missing, "5", `5`), env(stream+".c", "6", `6`),
	}
	errs := publishertest.Publish(t, p, 20*time.Second, batch...)
	for i, ok := range []bool{true, false, false, true, false, true} {
		if ok && errs[i] != nil {
			t.Errorf("message %d: %v", i, errs[i])
		}
		if !ok && publisher.Classify(errs[i]) != publisher.ClassPermanent {
			t.Errorf("message %d: %v, want a permanent error", i, errs[i])
		}
	}
	publishertest.WantClass(t, "missing stream", errs[1], publisher.ClassPermanent, "no JetStream stream for subject")
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
	_, p, stream := publisherOn(t, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 1024 })
	e := env(stream+".orders", "k", `"`+strings.Repeat("x", 2048)+`"`)
	publishertest.WantClass(t, "over max_msg_size", publishertest.Publish(t, p, 10*time.Second, e)[0], publisher.ClassPermanent, "max_msg_size")
}

// A full stream (limits with discard=new) refuses for now: retried, not
// dead, and not unknown.
func TestFullStreamIsTransient(t *testing.T) {
	t.Parallel()
	_, p, stream := publisherOn(t, func(c *jetstream.StreamConfig) { c.MaxMsgs = 1; c.Discard = jetstream.DiscardNew })
	if errs := publishertest.Publish(t, p, 10*time.Second, env(stream+".a", "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	publishertest.WantClass(t, "full stream", publishertest.Publish(t, p, 10*time.Second, env(stream+".a", "k", `2`))[0], publisher.ClassTransient, "JetStream refused the message")
}

// proxied connects through a fault proxy in front of the local server.
func proxied(t *testing.T) (*faultproxy.Proxy, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	connect(t) // fail or skip here when the server is missing
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	fp := faultproxy.Start(t, u.Host)
	nc, js := connectTo(t, "nats://"+fp.Addr(), nats.ReconnectBufSize(-1))
	return fp, nc, js
}

// viaProxy is a publisher whose connection goes through a fault proxy,
// and a stream made over a direct connection, to publish into and count.
type viaProxy struct {
	fp     *faultproxy.Proxy
	nc     *nats.Conn          // the proxied connection
	js     jetstream.JetStream // over nc
	direct jetstream.JetStream
	stream string
	p      *outboxnats.Publisher // over js
}

func newViaProxy(t *testing.T) *viaProxy {
	t.Helper()
	v := &viaProxy{}
	_, v.direct = connect(t)
	v.stream = newStream(t, v.direct, nil)
	v.fp, v.nc, v.js = proxied(t)
	v.p = newPublisher(t, v.js)
	return v
}

// While the connection is down every message is unavailable (the relay
// pauses the route without counting attempts); once the server is back,
// the connection recovers by itself and publishing works again.
func TestUnavailableThenReconnects(t *testing.T) {
	t.Parallel()
	v := newViaProxy(t)
	if errs := publishertest.Publish(t, v.p, 10*time.Second, env(v.stream+".a", "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	v.fp.SetMode(faultproxy.Refuse)
	relaytest.WaitFor(t, 10*time.Second, "the client to notice the disconnect", func() bool { return !v.nc.IsConnected() })
	down := []*publisher.Envelope{env(v.stream+".a", "k1", `2`), env(v.stream+".b", "k2", `3`)}
	for i, err := range publishertest.Publish(t, v.p, 10*time.Second, down...) {
		publishertest.WantClass(t, "publish while disconnected", err, publisher.ClassUnavailable, "not connected")
		_ = i
	}
	v.fp.SetMode(faultproxy.Pass)
	relaytest.WaitFor(t, 20*time.Second, "the client to reconnect", v.nc.IsConnected)
	if errs := publishertest.Publish(t, v.p, 10*time.Second, down...); errs[0] != nil || errs[1] != nil {
		t.Fatalf("publish after reconnect: %v", errs)
	}
	if n := streamCount(t, v.direct, v.stream); n != 3 {
		t.Fatalf("stream holds %d messages, want 3", n)
	}
}

// A server that swallows the message and never answers: the PubAck never
// comes, so the outcome is unknown, never success.
func TestNoPubAckIsUnknown(t *testing.T) {
	t.Parallel()
	v := newViaProxy(t)
	v.fp.SetMode(faultproxy.Blackhole)
	for _, err := range publishertest.Publish(t, v.p, time.Second, env(v.stream+".a", "k1", `1`), env(v.stream+".b", "k2", `2`)) {
		publishertest.WantClass(t, "no PubAck", err, publisher.ClassUnknown, "no PubAck")
	}
}

// A connection lost while PubAcks are awaited ends the wait at once, as
// an unknown outcome rather than a deadline.
func TestDisconnectWhileAwaitingIsUnknown(t *testing.T) {
	t.Parallel()
	v := newViaProxy(t)
	v.fp.SetMode(faultproxy.Blackhole)
	done := make(chan []error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- v.p.Publish(ctx, []*publisher.Envelope{env(v.stream+".a", "k1", `1`), env(v.stream+".b", "k2", `2`)})
	}()
	relaytest.WaitFor(t, 10*time.Second, "the messages to be in flight", func() bool { return v.js.PublishAsyncPending() == 2 })
	v.fp.SetMode(faultproxy.Refuse)
	select {
	case errs := <-done:
		for _, err := range errs {
			publishertest.WantClass(t, "disconnect while awaiting", err, publisher.ClassUnknown, "connection")
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
	publishertest.WantClass(t, "publish after Close", publishertest.Publish(t, p, 5*time.Second, env(stream+".a", "k", `1`))[0], publisher.ClassTransient, "closed")

	p2 := newPublisher(t, js)
	nc.Close()
	publishertest.WantClass(t, "closed connection", publishertest.Publish(t, p2, 5*time.Second, env(stream+".a", "k", `1`))[0], publisher.ClassUnavailable, "connection closed")
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
	var batch []*publisher.Envelope
	for i := range 300 {
		batch = append(batch, env(stream+".orders", "key-"+strconv.Itoa(i), strconv.Itoa(i)))
	}
	for i, err := range publishertest.Publish(t, p, 30*time.Second, batch...) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if n := streamCount(t, js, stream); n != 300 {
		t.Fatalf("stream holds %d messages, want 300", n)
	}
}
