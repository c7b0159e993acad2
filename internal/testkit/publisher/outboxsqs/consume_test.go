package outboxsqs_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/testkit/sqstest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
)

const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// delivery is one call of a consumer's handler.
type delivery struct {
	m     *inbox.Message
	trace string
}

// consume runs Consume on url until the test ends, handing each call to
// the returned channel after fn decided its result; it checks that
// Consume returned nil.
func consume(t *testing.T, c *sqs.Client, url string, opts *outboxsqs.ConsumeOptions, fn func(n int32, m *inbox.Message) error) <-chan delivery {
	t.Helper()
	ch := make(chan delivery, 16)
	var calls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- outboxsqs.Consume(ctx, c, url, func(ctx context.Context, m *inbox.Message) error {
			err := fn(calls.Add(1), m)
			ch <- delivery{m, trace.SpanContextFromContext(ctx).TraceID().String()}
			return err
		}, opts)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Consume: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Consume did not return within 30 s of its context ending")
		}
	})
	return ch
}

func next(t *testing.T, ch <-chan delivery, d time.Duration) delivery {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no delivery within %v", d)
		return delivery{}
	}
}

// queueEmpty reports whether nothing is left in the queue, visible or in
// flight.
func queueEmpty(t *testing.T, c *sqs.Client, url string) bool {
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatalf("queue attributes: %v", err)
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConsume: a published message reaches the handler decoded (id,
// topic, key, content type, headers, payload) with the producer's trace;
// a handler failure leaves it to come back after its visibility timeout,
// and success deletes it. On a FIFO queue the group's order holds.
func TestConsume(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		name := "Standard"
		if fifo {
			name = "FIFO"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := sqstest.Client(t)
			q := sqstest.RandomName("outboxtest-")
			if fifo {
				q += ".fifo"
			}
			url := sqstest.CreateQueue(t, c, q, nil)
			p, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint), nil)
			if err != nil {
				t.Fatal(err)
			}
			ch := consume(t, c, url, &outboxsqs.ConsumeOptions{WaitTime: time.Second, VisibilityTimeout: time.Second}, func(n int32, m *inbox.Message) error {
				if n <= 2 {
					return errors.New("injected failure")
				}
				return nil
			})
			e := sqstest.Env(q, "order-42", `{"order_id":42}`, map[string]string{"x-tenant": "acme", publisher.HeaderTraceParent: traceParent})
			sqstest.PublishOK(t, p, e)
			for i := range 3 { // two failures, then success
				d := next(t, ch, 30*time.Second)
				m := d.m
				if m.ID != e.ID || m.Topic != e.Topic || m.Key != "order-42" || m.ContentType != "application/json" || string(m.Payload) != `{"order_id":42}` {
					t.Fatalf("delivery %d: %+v, want %+v", i+1, m, e)
				}
				for k, v := range e.Headers {
					if m.Headers[k] != v {
						t.Errorf("header %s = %q, want %q", k, m.Headers[k], v)
					}
				}
				if d.trace != traceID {
					t.Errorf("handler's trace id %q, want the producer's", d.trace)
				}
			}
			waitFor(t, 10*time.Second, "the message deleted", func() bool { return queueEmpty(t, c, url) })
			select {
			case d := <-ch:
				t.Fatalf("a fourth delivery: %+v", d.m)
			default:
			}
		})
	}
}

// TestConsumeKeepsGroupOrder: on a FIFO queue, when a message's handler
// fails, the later messages of its group wait for it: the group is
// applied in order (the local server hands one message of a group per
// receive; TestConsumeSkipsFailedGroup covers several).
func TestConsumeKeepsGroupOrder(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	q := sqstest.RandomName("outboxtest-") + ".fifo"
	url := sqstest.CreateQueue(t, c, q, nil)
	p, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	var batch []string
	for i := range 3 {
		e := sqstest.Env(q, "k", `{"seq":`+itoa(i)+`}`, nil)
		sqstest.PublishOK(t, p, e) // one call per message of the key, as the relay does
		batch = append(batch, e.ID)
	}
	var failed atomic.Bool
	var applied []string // only the handler goroutine touches it until the end
	ch := consume(t, c, url, &outboxsqs.ConsumeOptions{WaitTime: time.Second, VisibilityTimeout: time.Second}, func(n int32, m *inbox.Message) error {
		if m.ID == batch[1] && !failed.Swap(true) {
			return errors.New("injected failure")
		}
		if m.ID == batch[2] && !slices.Contains(applied, batch[1]) {
			t.Errorf("message 2 handled before message 1 succeeded (applied %v)", applied)
		}
		applied = append(applied, m.ID)
		return nil
	})
	for range 4 { // three messages, one of them twice
		next(t, ch, 30*time.Second)
	}
	waitFor(t, 10*time.Second, "the queue emptied", func() bool { return queueEmpty(t, c, url) })
	if !slices.Equal(applied, batch) {
		t.Fatalf("applied %v, want %v", applied, batch)
	}
}

// TestConsumeExtendsVisibility: while a handler runs longer than the
// visibility timeout, the message stays hidden from other consumers.
func TestConsumeExtendsVisibility(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	q := sqstest.RandomName("outboxtest-")
	url := sqstest.CreateQueue(t, c, q, nil)
	p, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	ch := consume(t, c, url, &outboxsqs.ConsumeOptions{WaitTime: time.Second, VisibilityTimeout: time.Second}, func(n int32, m *inbox.Message) error {
		started <- struct{}{}
		<-release
		return nil
	})
	sqstest.PublishOK(t, p, sqstest.Env(q, "k", `{}`, nil))
	<-started
	// Three visibility timeouts pass while the handler runs; another
	// receiver sees nothing.
	for range 3 {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) != 0 {
			close(release)
			t.Fatalf("another receiver got the message while its handler ran")
		}
	}
	close(release)
	next(t, ch, 10*time.Second)
	waitFor(t, 10*time.Second, "the message deleted", func() bool { return queueEmpty(t, c, url) })
}

// TestDecodeRejectsForeign: a message without message-id is not the
// outbox's.
func TestDecodeRejectsForeign(t *testing.T) {
	t.Parallel()
	body := "not from the outbox"
	if _, err := outboxsqs.Decode(types.Message{Body: &body}); !errors.Is(err, outboxsqs.ErrNoMessageID) {
		t.Fatalf("Decode: %v, want ErrNoMessageID", err)
	}
}

// TestCloudEvents: with Config.CloudEvents every message carries ce-
// attributes, and Decode reads it into the message the plain wire gives.
func TestCloudEvents(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	q := sqstest.RandomName("outboxtest-")
	url := sqstest.CreateQueue(t, c, q, nil)
	ce, err := outboxce.Parse(outboxce.FormatBinary, "/orders-service")
	if err != nil {
		t.Fatal(err)
	}
	p, err := outboxsqs.New(sqstest.NewClient(sqstest.Endpoint), &outboxsqs.Config{CloudEvents: ce})
	if err != nil {
		t.Fatal(err)
	}
	e := sqstest.Env(q, "order-42", `{"order_id":42}`, map[string]string{"x-tenant": "acme", publisher.HeaderTraceParent: traceParent})
	sqstest.PublishOK(t, p, e)
	raw := sqstest.NewReader(c).Read(t, url, 1, 10*time.Second)[0]
	for _, a := range []string{"ce-specversion", "ce-id", "ce-source", "ce-type", "ce-subject", "message-id"} {
		if raw.MessageAttributes[a].StringValue == nil && raw.MessageAttributes[outboxsqs.AttrHeaders].StringValue == nil {
			t.Errorf("attribute %s missing", a)
		}
	}
	if v := raw.MessageAttributes["ce-source"].StringValue; v == nil || *v != "/orders-service" {
		t.Errorf("ce-source = %v", v)
	}
	m, err := outboxsqs.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != e.ID || m.Topic != e.Topic || m.Key != "order-42" || m.ContentType != "application/json" || string(m.Payload) != `{"order_id":42}` ||
		m.Headers["x-tenant"] != "acme" || m.Headers[publisher.HeaderTraceParent] != traceParent {
		t.Fatalf("decoded %+v, want %+v", m, e)
	}
	if got := trace.SpanContextFromContext(m.Context(context.Background())).TraceID().String(); got != traceID {
		t.Errorf("trace %q", got)
	}
}

// ops is an http.RoundTripper that answers each SQS operation with its
// function (see classify_test.go): a stand-in for behaviour of SQS that
// the local server does not have.
type ops map[string]func(req map[string]any) answer

func (o ops) RoundTrip(r *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	f, ok := o[op]
	if !ok {
		return nil, fmt.Errorf("no answer for %s", op)
	}
	var req map[string]any
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &req)
	a := f(req)
	h := http.Header{"Content-Type": {"application/x-amz-json-1.0"}}
	return &http.Response{StatusCode: a.status, Header: h, Body: io.NopCloser(strings.NewReader(a.body)), ContentLength: int64(len(a.body)), Request: r}, nil
}

// TestConsumeSkipsFailedGroup: SQS may hand several messages of one FIFO
// group in one receive (the local server hands one per group, so its
// answers are given here by a stand-in): when one fails, the later ones
// of its group in that receive are neither handled nor deleted, and
// other groups go on.
func TestConsumeSkipsFailedGroup(t *testing.T) {
	t.Parallel()
	msg := func(id, group string) string {
		body := `{"id":"` + id + `"}`
		sum := md5.Sum([]byte(body))
		return `{"MessageId":"sqs-` + id + `","ReceiptHandle":"rh-` + id + `","Body":` + strconv.Quote(body) + `,"MD5OfBody":"` + hex.EncodeToString(sum[:]) +
			`","Attributes":{"MessageGroupId":"` + group + `"},"MessageAttributes":{"message-id":{"DataType":"String","StringValue":"` + id + `"},"outbox-topic":{"DataType":"String","StringValue":"t"}}}`
	}
	var mu sync.Mutex
	var deleted []string
	received := false
	c := sqstest.NewClient("http://127.0.0.1:1", func(o *sqs.Options) {
		o.RetryMaxAttempts = 1
		o.HTTPClient = &http.Client{Transport: ops{
			"ReceiveMessage": func(map[string]any) answer {
				mu.Lock()
				defer mu.Unlock()
				if received {
					return answer{200, "", `{"Messages":[]}`}
				}
				received = true
				return answer{200, "", `{"Messages":[` + strings.Join([]string{msg("a1", "A"), msg("b1", "B"), msg("a2", "A"), msg("b2", "B"), msg("a3", "A")}, ",") + `]}`}
			},
			"DeleteMessage": func(req map[string]any) answer {
				mu.Lock()
				deleted = append(deleted, strings.TrimPrefix(req["ReceiptHandle"].(string), "rh-"))
				mu.Unlock()
				return answer{200, "", `{}`}
			},
			"ChangeMessageVisibilityBatch": func(map[string]any) answer { return answer{200, "", `{"Successful":[],"Failed":[]}`} },
		}}
	})
	var handled []string
	ch := consume(t, c, "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo", &outboxsqs.ConsumeOptions{WaitTime: time.Second}, func(n int32, m *inbox.Message) error {
		handled = append(handled, m.ID)
		if m.ID == "a2" {
			return errors.New("injected failure")
		}
		return nil
	})
	for range 4 {
		next(t, ch, 10*time.Second)
	}
	waitFor(t, 10*time.Second, "three deletes", func() bool { mu.Lock(); defer mu.Unlock(); return len(deleted) == 3 })
	if want := []string{"a1", "b1", "a2", "b2"}; !slices.Equal(handled, want) {
		t.Errorf("handled %v, want %v (a3 waits for a2)", handled, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"a1", "b1", "b2"}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
}
