package tooltest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/uuid"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxurl"
	"github.com/txoutbox/outbox/webhooksig"
)

// The CloudEvents tests publish with our publishers to the real brokers
// and read every message back twice: with the CloudEvents Go SDK, the
// independent reader, which must find a valid event with the expected
// attributes and data; and with the destination package's consumer
// helper, which must give the message the plain wire gives.

const (
	ceSource    = "/orders"
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

var ceCreatedAt = time.Date(2026, 12, 1, 10, 30, 0, 123456000, time.UTC)

// ceEnvelope is the message every CloudEvents test publishes to dest:
// a JSON payload (spaced, so that byte-for-byte matters), a key, a trace
// and, where extra is set, a producer header.
func ceEnvelope(dest string, extra map[string]string) *outbox.Envelope {
	h := map[string]string{
		publisher.HeaderTopic: "order.created", publisher.HeaderBusinessKey: "order-42",
		publisher.HeaderContentType: "application/json", publisher.HeaderTraceParent: traceParent,
	}
	for k, v := range extra {
		h[k] = v
	}
	return &outbox.Envelope{
		ID: uuid.Must(uuid.NewV7()).String(), Topic: "order.created", Key: "order-42", Destination: dest,
		Payload: []byte(`{"order_id": 42,  "total": "9.90"}`), Headers: h, Attempt: 1, CreatedAt: ceCreatedAt,
	}
}

// openCE opens rawURL with our URL opener and closes it at cleanup.
func openCE(t *testing.T, rawURL string, opts *outboxurl.Options) outbox.Publisher {
	t.Helper()
	p, err := outboxurl.Open(rawURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func publishCE(t *testing.T, p outbox.Publisher, env *outbox.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if errs := p.Publish(ctx, []*outbox.Envelope{env}); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("publish: %v", errs)
	}
}

// sdkEvent reads msg with the SDK and checks the event against env: a
// valid CloudEvents 1.0 event whose id is the message id, type the topic,
// source ceSource, time the enqueue time, datacontenttype the content
// type, subject the key, traceparent the producer's trace and data the
// payload byte for byte.
func sdkEvent(t *testing.T, msg binding.Message, env *outbox.Envelope) *event.Event {
	t.Helper()
	ev, err := binding.ToEvent(context.Background(), msg)
	if err != nil {
		t.Fatalf("the CloudEvents SDK cannot read the message: %v", err)
	}
	if err := ev.Validate(); err != nil {
		t.Errorf("the CloudEvents SDK finds the event invalid: %v", err)
	}
	if ev.SpecVersion() != "1.0" || ev.ID() != env.ID || ev.Type() != env.Topic || ev.Source() != ceSource ||
		!ev.Time().Equal(env.CreatedAt) || ev.DataContentType() != "application/json" || ev.Subject() != env.Key {
		t.Errorf("SDK event attributes:\n%s\nwant id %s, type %s, source %s, time %s, subject %s", ev, env.ID, env.Topic, ceSource, env.CreatedAt, env.Key)
	}
	if tp, _ := ev.Extensions()["traceparent"].(string); tp != traceParent {
		t.Errorf("traceparent extension = %v, want %s", ev.Extensions()["traceparent"], traceParent)
	}
	if !bytes.Equal(ev.Data(), env.Payload) {
		t.Errorf("SDK event data %q, want %q", ev.Data(), env.Payload)
	}
	return ev
}

// checkDecoded checks that our consumer helper decoded env's CloudEvent
// into the message the plain wire gives.
func checkDecoded(t *testing.T, m *inbox.Message, err error, env *outbox.Envelope) {
	t.Helper()
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if m.ID != env.ID || m.Topic != env.Topic || m.Key != env.Key || m.ContentType != "application/json" || !bytes.Equal(m.Payload, env.Payload) {
		t.Errorf("decoded %+v, want the envelope's id %s, topic, key, content type and payload", m, env.ID)
	}
	for k, v := range env.Headers {
		if m.Headers[k] != v {
			t.Errorf("decoded header %s = %q, want %q", k, m.Headers[k], v)
		}
	}
	if sc := trace(m); sc != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("decoded message's trace id %q", sc)
	}
}

// received is one request the webhook receiver got.
type received struct {
	header http.Header
	body   []byte
}

// webhookReceiver is an httptest server that records every POST and
// answers 204.
func webhookReceiver(t *testing.T) (string, func() []received) {
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{r.Header.Clone(), b})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

const ceSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestCloudEventsWebhook: a webhook route with format=cloudevents sends
// the binary mode (ce- headers) and one with cloudevents-structured the
// JSON event format; the SDK reads both as the same event, the Standard
// Webhooks signature verifies over the body as sent, and inbox.DecodeHTTP
// gives the plain wire's message.
func TestCloudEventsWebhook(t *testing.T) {
	for _, format := range []string{"cloudevents", "cloudevents-structured"} {
		t.Run(format, func(t *testing.T) {
			url, got := webhookReceiver(t)
			p := openCE(t, url+"/hooks?format="+format+"&ce_source=%2Forders", &outboxurl.Options{WebhookSecret: ceSecret})
			env := ceEnvelope("orders", map[string]string{"x-tenant": "acme"})
			publishCE(t, p, env)
			reqs := got()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			ct := r.header.Get("Content-Type")
			if format == "cloudevents" && (r.header.Get("Ce-Id") != env.ID || ct != "application/json" || !bytes.Equal(r.body, env.Payload)) {
				t.Errorf("binary mode: ce-id %q, content-type %q, body %s", r.header.Get("Ce-Id"), ct, r.body)
			}
			if format == "cloudevents-structured" && (ct != "application/cloudevents+json" || r.header.Get("Ce-Id") != "") {
				t.Errorf("structured mode: content-type %q, ce-id %q", ct, r.header.Get("Ce-Id"))
			}
			if r.header.Get("Outbox-Topic") != "" || r.header.Get("X-Tenant") != "acme" || r.header.Get("Traceparent") != traceParent {
				t.Errorf("headers %v: want no outbox-topic, the producer's x-tenant and the plain traceparent", r.header)
			}
			if err := webhooksig.Verify(ceSecret, r.header, r.body, time.Minute, time.Now()); err != nil {
				t.Errorf("signature: %v", err)
			}
			sdkEvent(t, cehttp.NewMessage(r.header, io.NopCloser(bytes.NewReader(r.body))), env)
			m, err := inbox.DecodeHTTP(r.header, r.body)
			checkDecoded(t, m, err, env)
		})
	}
}

// genericMessage is a binding.Message over a protocol whose binding puts
// each attribute under prefix+name and datacontenttype in a content type
// property: AMQP (cloudEvents:) and MQTT 5 (no prefix), whose SDK protocol
// modules are not used here. The attribute lookup is the SDK's own
// (spec.WithPrefix), as in its protocol modules.
type genericMessage struct {
	prefix      string
	props       map[string]string
	contentType string
	body        []byte
}

func (m *genericMessage) specs() *spec.Versions { return spec.WithPrefix(m.prefix) }

func (m *genericMessage) ReadEncoding() binding.Encoding {
	if m.specs().Version(m.props[m.specs().PrefixedSpecVersionName()]) != nil {
		return binding.EncodingBinary
	}
	return binding.EncodingUnknown
}

func (m *genericMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m *genericMessage) ReadBinary(ctx context.Context, w binding.BinaryWriter) error {
	v := m.specs().Version(m.props[m.specs().PrefixedSpecVersionName()])
	if v == nil {
		return binding.ErrNotBinary
	}
	for k, val := range m.props {
		if !strings.HasPrefix(k, m.prefix) {
			continue
		}
		var err error
		if a := v.Attribute(k); a != nil {
			err = w.SetAttribute(a, val)
		} else {
			err = w.SetExtension(strings.TrimPrefix(k, m.prefix), val)
		}
		if err != nil {
			return err
		}
	}
	if m.contentType != "" {
		if err := w.SetAttribute(v.AttributeFromKind(spec.DataContentType), m.contentType); err != nil {
			return err
		}
	}
	return w.SetData(bytes.NewReader(m.body))
}

func (m *genericMessage) Finish(error) error { return nil }

func (m *genericMessage) GetAttribute(k spec.Kind) (spec.Attribute, interface{}) {
	v := m.specs().Version(m.props[m.specs().PrefixedSpecVersionName()])
	if v == nil {
		return nil, nil
	}
	a := v.AttributeFromKind(k)
	if a == nil {
		return nil, nil
	}
	if k == spec.DataContentType && m.contentType != "" {
		return a, m.contentType
	}
	if val, ok := m.props[a.PrefixedName()]; ok {
		return a, val
	}
	return a, nil
}

func (m *genericMessage) GetExtension(name string) interface{} {
	if val, ok := m.props[m.prefix+name]; ok {
		return val
	}
	return nil
}

var _ binding.MessageMetadataReader = (*genericMessage)(nil)

// trace is the trace id a handler of m runs under.
func trace(m *inbox.Message) string {
	return oteltrace.SpanContextFromContext(m.Context(context.Background())).TraceID().String()
}
