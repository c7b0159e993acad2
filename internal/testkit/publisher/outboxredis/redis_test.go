package outboxredis_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxredis"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func newPublisher(t testing.TB, c redis.UniversalClient, cfg *outboxredis.Config) *outboxredis.Publisher {
	t.Helper()
	p, err := outboxredis.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func publish(p publisher.Publisher, batch ...*publisher.Envelope) []error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return p.Publish(ctx, batch)
}

func env(dest, key, payload string) *publisher.Envelope {
	return publishertest.Envelope(dest, key, []byte(payload), "application/json", nil)
}

func wantClass(t *testing.T, err error, want publisher.ErrorClass, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want a %v error", want)
	}
	if got := publisher.Classify(err); got != want {
		t.Fatalf("error %q is %v, want %v", err, got, want)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
}

// TestWireFormat checks the entry field by field, in order, as a consumer
// of another language sees it (raw XRANGE).
func TestWireFormat(t *testing.T) {
	t.Parallel()
	admin, stream := localStream(t, "wire")
	p := newPublisher(t, admin, nil)
	e := publishertest.Envelope(stream, "order-42", []byte(`{"order_id":42,"note":"<&>"}`), "application/json",
		map[string]string{"x-tenant": "acme", publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	e.Topic = "order.created"
	e.Headers[publisher.HeaderTopic] = "order.created"
	if errs := publish(p, e); errs[0] != nil {
		t.Fatal(errs[0])
	}
	raw := mustDo(t, admin, "XRANGE", stream, "-", "+").([]any)
	if len(raw) != 1 {
		t.Fatalf("XRANGE returned %d entries, want 1", len(raw))
	}
	fields := raw[0].([]any)[1].([]any)
	var names []string
	values := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		names = append(names, fields[i].(string))
		values[fields[i].(string)] = fields[i+1].(string)
	}
	if got, want := strings.Join(names, " "), "message_id topic business_key payload headers"; got != want {
		t.Errorf("fields %q, want %q", got, want)
	}
	if values["message_id"] != e.ID || values["topic"] != "order.created" || values["business_key"] != "order-42" || values["payload"] != string(e.Payload) {
		t.Errorf("values %v", values)
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(values["headers"]), &h); err != nil {
		t.Fatalf("headers %q: %v", values["headers"], err)
	}
	want := map[string]string{
		"outbox-topic": "order.created", "outbox-business-key": "order-42", "content-type": "application/json",
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x-tenant": "acme",
	}
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	if strings.Contains(values["headers"], `\u003c`) {
		t.Errorf("headers JSON escapes HTML needlessly: %s", values["headers"])
	}

	// A message without a key: business_key is empty and the header absent.
	e2 := env(stream, "", `{}`)
	if errs := publish(p, e2); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := readAll(t, admin, stream)
	if len(got) != 2 || got[1].Key != "" || got[1].Headers[publisher.HeaderBusinessKey] != "" {
		t.Fatalf("keyless entry: %+v", got[len(got)-1])
	}
}

// TestResultsPerMessage mixes deliverable and undeliverable messages in
// one batch: every result is the message's own, in order.
func TestResultsPerMessage(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	ok1, ok2 := streamName(t, admin, "ok"), streamName(t, admin, "ok")
	createStream(t, admin, ok1)
	createStream(t, admin, ok2)
	wrong := streamName(t, admin, "wrongtype")
	mustDo(t, admin, "SET", wrong, "not a stream")
	missing := streamName(t, admin, "missing")
	p := newPublisher(t, admin, nil)

	batch := []*publisher.Envelope{env(ok1, "a", `1`), env(wrong, "b", `2`), env(ok2, "c", `3`), env(missing, "d", `4`), env("", "e", `5`), nil, env(ok1, "f", `6`)}
	errs := publish(p, batch...)
	if len(errs) != len(batch) {
		t.Fatalf("%d results for %d messages", len(errs), len(batch))
	}
	for _, i := range []int{0, 2, 6} {
		if errs[i] != nil {
			t.Errorf("message %d: %v", i, errs[i])
		}
	}
	wantClass(t, errs[1], publisher.ClassPermanent, "WRONGTYPE", "not a stream", wrong)
	wantClass(t, errs[3], publisher.ClassPermanent, "does not exist", missing, "create=true")
	if !errors.Is(errs[3], outboxredis.ErrStreamNotFound) {
		t.Errorf("missing stream error %q does not wrap ErrStreamNotFound", errs[3])
	}
	wantClass(t, errs[4], publisher.ClassPermanent, "empty stream name")
	wantClass(t, errs[5], publisher.ClassPermanent, "nil envelope")
	if n := len(readAll(t, admin, ok1)); n != 2 {
		t.Errorf("%s holds %d entries, want 2", ok1, n)
	}
	if n, _ := admin.Exists(context.Background(), missing).Result(); n != 0 {
		t.Errorf("the missing stream was created")
	}
	if typ, _ := admin.Type(context.Background(), wrong).Result(); typ != "string" {
		t.Errorf("the string key became a %s", typ)
	}
}

func TestCreateStreams(t *testing.T) {
	t.Parallel()
	admin := localClient(t)
	stream := streamName(t, admin, "created")
	p := newPublisher(t, admin, &outboxredis.Config{CreateStreams: true})
	if errs := publish(p, env(stream, "k", `{}`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := readAll(t, admin, stream); len(got) != 1 {
		t.Fatalf("stream holds %d entries, want 1", len(got))
	}
}

func TestMaxLenTrims(t *testing.T) {
	t.Parallel()
	admin, stream := localStream(t, "maxlen")
	p := newPublisher(t, admin, &outboxredis.Config{MaxLen: 10})
	const total = 600
	for round := 0; round < total/100; round++ {
		var batch []*publisher.Envelope
		for i := 0; i < 100; i++ {
			batch = append(batch, env(stream, fmt.Sprintf("k%d", i), `{}`))
		}
		for i, err := range publish(p, batch...) {
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
	}
	n, err := admin.XLen(context.Background(), stream).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Approximate trimming removes whole nodes (100 entries by default).
	if n < 10 || n >= total {
		t.Fatalf("XLEN = %d after %d entries with MaxLen 10, want trimmed to about 10", n, total)
	}
}

// TestLargeBatchSplitsPipelines: a batch beyond MaxPipelineBytes goes out
// in several pipelines, every message confirmed, in order.
func TestLargeBatchSplitsPipelines(t *testing.T) {
	t.Parallel()
	admin, stream := localStream(t, "split")
	p := newPublisher(t, admin, &outboxredis.Config{MaxPipelineBytes: 4096})
	var batch []*publisher.Envelope
	for i := 0; i < 50; i++ {
		batch = append(batch, env(stream, fmt.Sprintf("k%d", i), fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", 500))))
	}
	for i, err := range publish(p, batch...) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	got := readAll(t, admin, stream)
	if len(got) != len(batch) {
		t.Fatalf("%d entries, want %d", len(got), len(batch))
	}
	for i := range got {
		if got[i].ID != batch[i].ID {
			t.Fatalf("entry %d is %s, want %s: order lost", i, got[i].ID, batch[i].ID)
		}
	}
}

// TestWaitReplicas: the local Redis has no replica, so WAIT 1 comes back
// with 0 and the message is not confirmed, although it is on the primary.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	admin, stream := localStream(t, "wait")
	p := newPublisher(t, admin, &outboxredis.Config{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	errs := publish(p, env(stream, "a", `1`), env(stream, "b", `2`))
	for _, err := range errs {
		wantClass(t, err, publisher.ClassUnknown, "0 of 1 replicas", "on the primary")
	}
	if n := len(readAll(t, admin, stream)); n != 2 {
		t.Errorf("%d entries on the primary, want 2", n)
	}
	// WAIT 0 is satisfied at once.
	p0 := newPublisher(t, admin, &outboxredis.Config{WaitReplicas: 0})
	if errs := publish(p0, env(stream, "c", `3`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = c.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{redisAddr}})
	t.Cleanup(func() { _ = cluster.Close() })
	for _, tc := range []struct {
		client redis.UniversalClient
		cfg    *outboxredis.Config
		want   string
	}{
		{nil, nil, "nil client"},
		{c, &outboxredis.Config{MaxLen: -1}, "MaxLen"},
		{c, &outboxredis.Config{WaitReplicas: -1}, "WaitReplicas"},
		{c, &outboxredis.Config{WaitTimeout: -time.Second}, "WaitTimeout"},
		{c, &outboxredis.Config{WaitTimeout: time.Microsecond}, "WaitTimeout"},
		{c, &outboxredis.Config{MaxPipelineBytes: -1}, "MaxPipelineBytes"},
		{cluster, &outboxredis.Config{WaitReplicas: 1}, "WaitReplicas needs a *redis.Client"},
	} {
		p, err := outboxredis.New(tc.client, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%T, %+v) = %v, %v; want an error naming %s", tc.client, tc.cfg, p, err, tc.want)
		}
	}
	if p, err := outboxredis.New(cluster, nil); err != nil || p.Client() != cluster {
		t.Errorf("New(cluster, nil) = %v, %v", p, err)
	}
}

// TestCloseLeavesCallersClient: Close closes the client only with
// CloseClient, and waits for a publish in flight.
func TestCloseLeavesCallersClient(t *testing.T) {
	t.Parallel()
	_, stream := localStream(t, "close")
	ctx := context.Background()

	mine := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = mine.Close() })
	p, _ := outboxredis.New(mine, nil)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := mine.Ping(ctx).Err(); err != nil {
		t.Fatalf("the caller's client was closed: %v", err)
	}
	if errs := publish(p, env(stream, "k", `1`)); !errors.Is(errs[0], outboxredis.ErrClosed) {
		t.Fatalf("publish after Close = %v, want ErrClosed", errs[0])
	}

	owned := redis.NewClient(&redis.Options{Addr: redisAddr})
	p2, _ := outboxredis.New(owned, &outboxredis.Config{CloseClient: true})
	var wg sync.WaitGroup
	var inflight []error
	wg.Go(func() {
		var batch []*publisher.Envelope
		for i := 0; i < 500; i++ {
			batch = append(batch, env(stream, fmt.Sprintf("k%d", i), `{}`))
		}
		inflight = publish(p2, batch...)
	})
	time.Sleep(time.Millisecond) // let the publish start, most of the time
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := owned.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("owned client after Close: Ping = %v, want redis.ErrClosed", err)
	}
	// Close waited: each result is either confirmed or ErrClosed, never
	// a closed-client failure half way.
	for i, err := range inflight {
		if err != nil && !errors.Is(err, outboxredis.ErrClosed) {
			t.Fatalf("message %d of the batch in flight at Close: %v", i, err)
		}
	}
}

func TestConnectionRefusedIsUnavailable(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t)) // nothing listens there
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	p := newPublisher(t, c, &outboxredis.Config{CloseClient: true, MaxPipelineBytes: 100})
	// Two pipelines: the second is not tried after the first cannot connect.
	errs := publish(p, env("orders", "a", `1`), env("orders", "b", `2`))
	for _, err := range errs {
		wantClass(t, err, publisher.ClassUnavailable, "orders")
	}
	if !strings.Contains(errs[0].Error(), "refused") {
		t.Errorf("error %q does not say the connection was refused", errs[0])
	}
	if !strings.Contains(errs[1].Error(), "not sent") {
		t.Errorf("second pipeline's error %q does not say it was not sent", errs[1])
	}
}

// TestNoReplyIsUnknown: a server that stops answering after the pipeline
// went out leaves the outcome unknown, never success.
func TestNoReplyIsUnknown(t *testing.T) {
	t.Parallel()
	_, stream := localStream(t, "blackhole")
	proxy := faultproxy.Start(t, redisAddr)
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, ReadTimeout: 200 * time.Millisecond, MaxRetries: 1})
	p := newPublisher(t, c, &outboxredis.Config{CloseClient: true})
	if errs := publish(p, env(stream, "warm", `0`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	proxy.SetMode(faultproxy.Blackhole)
	for _, err := range publish(p, env(stream, "a", `1`), env(stream, "b", `2`)) {
		wantClass(t, err, publisher.ClassUnknown, "no reply", stream)
	}

	// The connection is cut while the publish is on its way (the proxy
	// holds it back): unknown too.
	proxy.SetMode(faultproxy.Pass)
	proxy.SetDelay(300 * time.Millisecond)
	done := make(chan []error, 1)
	go func() { done <- publish(p, env(stream, "c", `3`)) }()
	time.Sleep(100 * time.Millisecond)
	proxy.SetMode(faultproxy.Refuse)
	wantClass(t, (<-done)[0], publisher.ClassUnknown, "no reply")

	// The relay's deadline passes while waiting for the reply: unknown.
	proxy.SetDelay(0)
	proxy.SetMode(faultproxy.Pass)
	c2 := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	p2 := newPublisher(t, c2, &outboxredis.Config{CloseClient: true})
	if errs := publish(p2, env(stream, "warm2", `0`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	proxy.SetMode(faultproxy.Blackhole)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	wantClass(t, p2.Publish(ctx, []*publisher.Envelope{env(stream, "d", `4`)})[0], publisher.ClassUnknown)
}

// TestRestartReconnects: while the server is down the publisher reports
// it unavailable; once it is back, publishing works again on its own.
func TestRestartReconnects(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	admin := srv.client(t, nil)
	createStream(t, admin, "orders")
	p := newPublisher(t, srv.client(t, nil), nil)
	if errs := publish(p, env("orders", "a", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	srv.kill()
	wantClass(t, publish(p, env("orders", "b", `2`))[0], publisher.ClassUnavailable, "cannot reach")
	srv.start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := publish(p, env("orders", "c", `3`))[0]
		if err == nil {
			break
		}
		if c := publisher.Classify(err); c != publisher.ClassUnavailable && c != publisher.ClassUnknown {
			t.Fatalf("after restart: %v (%v)", err, c)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := readAll(t, admin, "orders")
	if len(got) != 2 || got[0].Key != "a" || got[1].Key != "c" {
		t.Fatalf("after restart the stream holds %+v, want a then c", got)
	}
}

// TestServerErrors drives a server of the test's own into states that
// refuse writes: each refusal has the class the relay needs.
func TestServerErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--busy-reply-threshold", "50")
	admin := srv.client(t, nil)
	createStream(t, admin, "orders")
	createStream(t, admin, "secret.orders")
	p := newPublisher(t, srv.client(t, func(o *redis.Options) { o.MaxRetries = -1 }), nil)

	t.Run("OOM", func(t *testing.T) {
		mustDo(t, admin, "CONFIG", "SET", "maxmemory", "1")
		defer mustDo(t, admin, "CONFIG", "SET", "maxmemory", "0")
		wantClass(t, publish(p, env("orders", "k", `1`))[0], publisher.ClassUnavailable, "OOM")
	})

	t.Run("NOPERM", func(t *testing.T) {
		mustDo(t, admin, "ACL", "SETUSER", "orders-only", "on", ">orders-pw", "~orders", "+@all")
		limited := newPublisher(t, srv.client(t, func(o *redis.Options) { o.Username, o.Password = "orders-only", "orders-pw" }), nil)
		errs := publish(limited, env("orders", "k", `1`), env("secret.orders", "k", `2`))
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		wantClass(t, errs[1], publisher.ClassPermanent, "NOPERM", "may not write")
	})

	t.Run("WrongPassword", func(t *testing.T) {
		bad := newPublisher(t, srv.client(t, func(o *redis.Options) { o.Username, o.Password = "orders-only", "wrong-pw-value" }), nil)
		err := publish(bad, env("orders", "k", `1`))[0]
		wantClass(t, err, publisher.ClassUnavailable)
		if strings.Contains(err.Error(), "wrong-pw-value") {
			t.Errorf("error %q shows the password", err)
		}
	})

	t.Run("BUSY", func(t *testing.T) {
		// A script that never ends makes the server answer BUSY to others.
		scripter := srv.client(t, func(o *redis.Options) { o.ReadTimeout = -1; o.MaxRetries = -1 })
		done := make(chan error, 1)
		go func() { done <- scripter.Eval(context.Background(), "while true do end", nil).Err() }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := admin.Ping(context.Background()).Err()
			if err != nil && strings.HasPrefix(err.Error(), "BUSY") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("server never became busy: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		err := publish(p, env("orders", "k", `1`))[0]
		mustDo(t, admin, "SCRIPT", "KILL")
		<-done
		wantClass(t, err, publisher.ClassUnavailable, "BUSY")
	})
}
