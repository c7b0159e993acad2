package outboxsqs_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/txoutbox/outbox/internal/testkit/sqstest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// target is the local SQS server: each destination is a fresh queue (a
// FIFO queue when fifo) named by the envelope's destination, read back by
// a client of its own. The publisher's client goes to endpoint.
func target(t *testing.T, endpoint string, fifo bool) *publishertest.Target {
	c := sqstest.Client(t)
	p, err := outboxsqs.New(sqstest.NewClient(endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := sqstest.NewReader(c)
	return &publishertest.Target{
		Publisher: p,
		NewDestination: func(t *testing.T) string {
			name := sqstest.RandomName("outboxtest-")
			if fifo {
				name += ".fifo"
			}
			sqstest.CreateQueue(t, c, name, nil)
			return name
		},
		Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
			var out []publishertest.Received
			for _, m := range r.Read(t, queueURL(t, c, dest), n, 20*time.Second) {
				rc := received(m, dest)
				if m, err := outboxsqs.Decode(m); err == nil {
					rc.Payload = m.Payload // a binary payload travels base64
				} else {
					t.Errorf("Decode: %v", err)
				}
				out = append(out, rc)
			}
			return out
		},
	}
}

// TestConformance runs the publisher conformance suite on standard and
// FIFO queues of the local server, the publisher's client through a fault
// proxy. A missing queue is not permanent (it takes the route down:
// TestMissingQueue), so that case is skipped.
func TestConformance(t *testing.T) { sqstest.RunConformance(t, target) }

// TestEntryFailsOthersSent: in one SendMessageBatch, the entry the queue
// refuses (over its MaximumMessageSize of 1024 bytes) is dead with the
// service's reason, and the others are stored and confirmed.
func TestEntryFailsOthersSent(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	name := sqstest.RandomName("outboxtest-")
	url := sqstest.CreateQueue(t, c, name, map[string]string{"MaximumMessageSize": "1024"})
	cnt := newCounter()
	p, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint, func(o *sqs.Options) { o.HTTPClient = &http.Client{Transport: cnt} }), nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := []*publisher.Envelope{
		sqstest.Env(name, "a", `{"n":1}`, nil),
		sqstest.Env(name, "b", `"`+strings.Repeat("x", 2000)+`"`, nil),
		sqstest.Env(name, "c", `{"n":3}`, nil),
	}
	errs := sqstest.Publish(t, p, batch...)
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("results %v, want the first and last confirmed", errs)
	}
	publishertest.WantClass(t, "the oversized entry", errs[1], publisher.ClassPermanent, "InvalidParameterValue", "1024")
	if n := cnt.count("SendMessageBatch"); n != 1 {
		t.Errorf("%d SendMessageBatch calls, want 1", n)
	}
	got := sqstest.NewReader(c).Read(t, url, 2, 10*time.Second)
	ids := map[string]bool{}
	for _, m := range got {
		ids[aws.ToString(m.MessageAttributes["message-id"].StringValue)] = true
	}
	if !ids[batch[0].ID] || !ids[batch[2].ID] {
		t.Errorf("arrived %v, want %s and %s", ids, batch[0].ID, batch[2].ID)
	}
}

// TestSplitsBatches: a batch goes in calls of at most 10 entries and
// 262,144 bytes; a message over the limit alone is dead with the reason
// and the rest are delivered.
func TestSplitsBatches(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	name := sqstest.RandomName("outboxtest-")
	url := sqstest.CreateQueue(t, c, name, nil)
	cnt := newCounter()
	p, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint, func(o *sqs.Options) { o.HTTPClient = &http.Client{Transport: cnt} }), nil)
	if err != nil {
		t.Fatal(err)
	}
	var batch []*publisher.Envelope
	for i := range 25 {
		batch = append(batch, sqstest.Env(name, fmt.Sprint("k", i), fmt.Sprintf(`{"n":%d}`, i), nil))
	}
	sqstest.PublishOK(t, p, batch...)
	if n := cnt.count("SendMessageBatch"); n != 3 {
		t.Errorf("25 small messages: %d SendMessageBatch calls, want 3", n)
	}

	big := strings.Repeat("y", 100<<10)
	batch = []*publisher.Envelope{sqstest.Env(name, "b1", big, nil), sqstest.Env(name, "b2", big, nil), sqstest.Env(name, "b3", big, nil),
		sqstest.Env(name, "huge", strings.Repeat("z", 262144), nil)}
	errs := sqstest.Publish(t, p, batch...)
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("message %d of 100 KiB: %v", i, errs[i])
		}
	}
	publishertest.WantClass(t, "a message over 262144 bytes", errs[3], publisher.ClassPermanent, "message too large", "SQS takes at most 262144")
	if n := cnt.count("SendMessageBatch"); n != 3+2 {
		t.Errorf("three messages of 100 KiB: %d SendMessageBatch calls, want 2", n-3)
	}
	if got := sqstest.NewReader(c).Read(t, url, 28, 20*time.Second); len(got) != 28 {
		t.Fatalf("%d arrived", len(got))
	}
}

// TestMissingQueue: a destination naming no queue takes the route down
// (unavailable, never the message's fault); once the queue exists the
// same publisher delivers to it. A queue URL that names no queue is
// unavailable too.
func TestMissingQueue(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	p, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	name := sqstest.RandomName("outboxtest-missing-")
	e := sqstest.Env(name, "k", `{}`, nil)
	publishertest.WantClass(t, "a missing queue", sqstest.Publish(t, p, e)[0], publisher.ClassUnavailable, name, "does not exist")

	url := sqstest.CreateQueue(t, c, name, nil)
	sqstest.PublishOK(t, p, e)
	if m := sqstest.NewReader(c).Read(t, url, 1, 10*time.Second)[0]; aws.ToString(m.MessageAttributes["message-id"].StringValue) != e.ID {
		t.Fatalf("arrived %v", m.MessageAttributes)
	}

	gone := strings.Replace(url, name, name+"-gone", 1)
	p2, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint), &outboxsqs.Config{QueueURL: gone})
	if err != nil {
		t.Fatal(err)
	}
	publishertest.WantClass(t, "a queue URL naming no queue", sqstest.Publish(t, p2, sqstest.Env("anything", "k", `{}`, nil))[0], publisher.ClassUnavailable, "does not exist")
}

// TestBadQueueName: a destination that cannot be a queue name is dead
// with the reason, without a call.
func TestBadQueueName(t *testing.T) {
	t.Parallel()
	p, err := outboxsqs.New(sqstest.NewClient("http://127.0.0.1:1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for dest, says := range map[string]string{
		"orders.created":                  "only letters, digits",
		"":                                "no queue name",
		strings.Repeat("q", 81):           "longer than 80",
		".fifo":                           "nothing before .fifo",
		"orders/created.fifo":             "only letters, digits",
		"commandes-équipe":                "only letters, digits",
		strings.Repeat("q", 75) + ".fifo": "", // valid: fails only as unreachable
	} {
		err := sqstest.Publish(t, p, sqstest.Env(dest, "k", `{}`, nil))[0]
		if says == "" {
			if publisher.Classify(err) == publisher.ClassPermanent {
				t.Errorf("%q: %v, a valid name", dest, err)
			}
			continue
		}
		publishertest.WantClass(t, fmt.Sprintf("destination %q", dest), err, publisher.ClassPermanent, "queue name", says)
	}
}

// TestFIFOMapping: on a FIFO queue the group is the business key (the
// topic when none) and the deduplication id the message id, so a
// message sent twice is stored once.
func TestFIFOMapping(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	name := sqstest.RandomName("outboxtest-") + ".fifo"
	url := sqstest.CreateQueue(t, c, name, nil)
	p, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	keyed := sqstest.Env(name, "order-42", `{"n":1}`, nil)
	unkeyed := sqstest.Env(name, "", `{"n":2}`, nil)
	spaced := sqstest.Env(name, "customer 7 / Zoë", `{"n":3}`, nil)
	sqstest.PublishOK(t, p, keyed, unkeyed, spaced)
	sqstest.PublishOK(t, p, keyed) // again: deduplicated
	r := sqstest.NewReader(c)
	got := r.Read(t, url, 3, 10*time.Second)
	want := map[string]string{keyed.ID: "order-42", unkeyed.ID: "conformance.test", spaced.ID: outboxsqs.GroupID("customer 7 / Zoë")}
	for _, m := range got {
		id := aws.ToString(m.MessageAttributes["message-id"].StringValue)
		if g := m.Attributes["MessageGroupId"]; g != want[id] {
			t.Errorf("message %s: group %q, want %q", id, g, want[id])
		}
		if d := m.Attributes["MessageDeduplicationId"]; d != id {
			t.Errorf("message %s: deduplication id %q", id, d)
		}
	}
	if g := outboxsqs.GroupID("customer 7 / Zoë"); !strings.HasPrefix(g, "sha256-") || len(g) != 71 {
		t.Errorf("GroupID of a key with blanks: %q", g)
	}
	// Nothing more arrives: the resend was a duplicate.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 1, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("after the resend: %d more messages (%v), want none", len(out.Messages), err)
	}
}

// TestWire: message-id and the headers as attributes, at most 10; what
// does not fit (or cannot be an attribute) in outbox-headers; a binary
// payload base64 with outbox-body-encoding; Decode gives all of it back.
func TestWire(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	name := sqstest.RandomName("outboxtest-")
	url := sqstest.CreateQueue(t, c, name, nil)
	p, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	many := map[string]string{publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x weird name": "v", "x-empty": ""}
	for i := range 12 {
		many[fmt.Sprintf("x-h%02d", i)] = fmt.Sprint("value ", i)
	}
	few := sqstest.Env(name, "k1", `{"plain":"Zoë"}`, map[string]string{"x-tenant": "acme"})
	crowded := sqstest.Env(name, "k2", `{"n":2}`, many)
	binary := publishertest.Envelope(name, "k3", []byte{0, 1, 2, 0xff, 0xfe, 'a'}, "application/octet-stream", nil)
	control := publishertest.Envelope(name, "k4", []byte("bell\a"), "text/plain", nil)
	batch := []*publisher.Envelope{few, crowded, binary, control}
	sqstest.PublishOK(t, p, batch...)
	got := sqstest.NewReader(c).Read(t, url, len(batch), 10*time.Second)
	byID := map[string]int{}
	for i, m := range got {
		byID[aws.ToString(m.MessageAttributes["message-id"].StringValue)] = i
		if len(m.MessageAttributes) > outboxsqs.MaxAttributes {
			t.Errorf("message with %d attributes", len(m.MessageAttributes))
		}
	}
	for _, e := range batch {
		i, ok := byID[e.ID]
		if !ok {
			t.Fatalf("message %s did not arrive", e.ID)
		}
		raw := got[i]
		m, err := outboxsqs.Decode(raw)
		if err != nil {
			t.Fatalf("Decode %s: %v", e.ID, err)
		}
		if m.ID != e.ID || m.Topic != e.Topic || m.Key != e.Key || m.ContentType != e.Headers[publisher.HeaderContentType] || !bytes.Equal(m.Payload, e.Payload) {
			t.Errorf("decoded %+v, want %+v", m, e)
		}
		for k, v := range e.Headers {
			if m.Headers[k] != v {
				t.Errorf("%s: header %q = %q, want %q", e.ID, k, m.Headers[k], v)
			}
		}
		attrs := raw.MessageAttributes
		enc := aws.ToString(attrs[outboxsqs.AttrBodyEncoding].StringValue)
		switch e {
		case binary, control:
			if enc != "base64" {
				t.Errorf("%s: outbox-body-encoding %q, want base64", e.ID, enc)
			}
		case few:
			if enc != "" || aws.ToString(raw.Body) != `{"plain":"Zoë"}` || aws.ToString(attrs["x-tenant"].StringValue) != "acme" {
				t.Errorf("plain message: body %q, encoding %q, x-tenant %v", aws.ToString(raw.Body), enc, attrs["x-tenant"])
			}
			if _, ok := attrs[outboxsqs.AttrHeaders]; ok {
				t.Errorf("plain message has %s", outboxsqs.AttrHeaders)
			}
		case crowded:
			if len(attrs) != outboxsqs.MaxAttributes || attrs[outboxsqs.AttrHeaders].StringValue == nil {
				t.Errorf("crowded message: %d attributes, %s %v", len(attrs), outboxsqs.AttrHeaders, attrs[outboxsqs.AttrHeaders])
			}
			for _, h := range []string{publisher.HeaderTopic, publisher.HeaderBusinessKey, publisher.HeaderContentType, publisher.HeaderTraceParent} {
				if attrs[h].StringValue == nil {
					t.Errorf("crowded message: %s is not an attribute of its own", h)
				}
			}
		}
	}
}

// TestReservedHeader: a producer header named as one of the wire's own
// attributes is dead with the reason.
func TestReservedHeader(t *testing.T) {
	t.Parallel()
	p, err := outboxsqs.New(sqstest.NewClient("http://127.0.0.1:1"), &outboxsqs.Config{QueueURL: "http://127.0.0.1:1/000000000000/q"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"message-id", "outbox-headers", "outbox-body-encoding"} {
		err := sqstest.Publish(t, p, sqstest.Env("q", "k", `{}`, map[string]string{h: "x"}))[0]
		publishertest.WantClass(t, "header "+h, err, publisher.ClassPermanent, "reserved", h)
	}
}

// TestNew: bad configurations are refused with the field named.
func TestNew(t *testing.T) {
	t.Parallel()
	c := sqstest.NewClient("http://127.0.0.1:1")
	for _, tc := range []struct {
		cfg  *outboxsqs.Config
		says string
	}{
		{&outboxsqs.Config{MaxMessageBytes: 2 << 20}, "MaxMessageBytes"},
		{&outboxsqs.Config{Concurrency: -1}, "Concurrency"},
		{&outboxsqs.Config{ThrottleWait: -1}, "ThrottleWait"},
		{&outboxsqs.Config{QueueURL: "orders"}, "QueueURL"},
		{&outboxsqs.Config{QueueURL: "https://h/1/q", QueueName: "q"}, "both"},
		{&outboxsqs.Config{QueueName: "a.b"}, "QueueName"},
	} {
		if _, err := outboxsqs.New(c, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("New(%+v): %v, want an error saying %q", tc.cfg, err, tc.says)
		}
	}
	if _, err := outboxsqs.New(nil, nil); err == nil {
		t.Error("New(nil client) succeeded")
	}
}

// TestUnreachable: nothing listening at the endpoint is unavailable.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	p, err := outboxsqs.New(sqstest.NewClient("http://127.0.0.1:1", func(o *sqs.Options) { o.RetryMaxAttempts = 1 }), &outboxsqs.Config{QueueURL: "http://127.0.0.1:1/000000000000/q"})
	if err != nil {
		t.Fatal(err)
	}
	publishertest.WantClass(t, "an endpoint nobody listens on", sqstest.Publish(t, p, sqstest.Env("q", "k", `{}`, nil))[0], publisher.ClassUnavailable, "SendMessageBatch")
}
