package outboxce_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/seal"
)

func envelope() *publisher.Envelope {
	return &publisher.Envelope{
		ID: "0190e6b4-8f3a-7c1e-9a4b-3f2d1c0b9a87", Topic: "order.created", Key: "order 42 – €",
		Destination: "orders", Payload: []byte(`{"id": 42}`),
		Headers: map[string]string{
			publisher.HeaderTopic: "order.created", publisher.HeaderBusinessKey: "order 42 – €",
			publisher.HeaderContentType: "application/json; charset=utf-8", publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"x-tenant": "acme", "ce-region": "eu west",
		},
		CreatedAt: time.Date(2026, 12, 1, 10, 30, 0, 123456000, time.FixedZone("CET", 3600)),
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		format, source, want, err string
	}{
		{"", "", "plain", ""},
		{"plain", "", "plain", ""},
		{"cloudevents", "", "cloudevents", ""},
		{"cloudevents-structured", "/orders", "cloudevents-structured", ""},
		{"cloudevent", "", "", `format="cloudevent": want plain, cloudevents or cloudevents-structured`},
		{"", "/orders", "", "ce_source needs format=cloudevents"},
		{"cloudevents", "a b", "", `ce_source="a b": want a URI-reference`},
	} {
		f, err := outboxce.Parse(c.format, c.source)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q, %q) = %v, want error %q", c.format, c.source, err, c.err)
			}
			continue
		}
		if err != nil || f.String() != c.want {
			t.Errorf("Parse(%q, %q) = %v, %v; want %s", c.format, c.source, f, err, c.want)
		}
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"order.created":    "order.created",
		"Euro € 😀":         "Euro%20%E2%82%AC%20%F0%9F%98%80",
		`50% "off"`:        "50%25%20%22off%22",
		"tab\there\x7fdel": "tab%09here%7Fdel",
	} {
		got := outboxce.Escape(in)
		if got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		back, err := outboxce.Unescape(got)
		if err != nil || back != in {
			t.Errorf("Unescape(%q) = %q, %v; want %q", got, back, err, in)
		}
	}
	if v, err := outboxce.Unescape(`"quoted \"value\""`); err != nil || v != `quoted "value"` {
		t.Errorf("Unescape of a quoted value = %q, %v", v, err)
	}
	if _, err := outboxce.Unescape("%C0%A0"); err == nil {
		t.Error("Unescape accepted an overlong UTF-8 encoding")
	}
}

// TestBindingsRoundTrip renders an envelope for every binding and decodes
// it back into the message the plain wire gives.
func TestBindingsRoundTrip(t *testing.T) {
	f := &outboxce.Format{Mode: outboxce.Binary, Source: "/orders"}
	for _, b := range []outboxce.Binding{outboxce.HTTP, outboxce.Kafka, outboxce.AMQP, outboxce.NATS, outboxce.MQTT} {
		t.Run(b.Name, func(t *testing.T) {
			env := envelope()
			if b.Prefix != "ce-" {
				delete(env.Headers, "ce-region") // a plain header there
			}
			if b.Prefix == "" {
				delete(env.Headers, "x-tenant") // not an attribute name
			}
			h, err := f.Headers(b, env)
			if err != nil {
				t.Fatal(err)
			}
			lp := strings.ToLower(b.Prefix)
			lower := map[string]string{}
			for k, v := range h {
				lower[strings.ToLower(k)] = v
			}
			if lower[lp+"id"] != env.ID || lower[lp+"specversion"] != "1.0" || lower[lp+"type"] != "order.created" {
				t.Errorf("headers %v: id, specversion or type wrong", h)
			}
			if got := lower[lp+"time"]; got != "2026-12-01T09:30:00.123456Z" {
				t.Errorf("time = %q", got)
			}
			if _, ok := h[publisher.HeaderTopic]; ok {
				t.Errorf("headers %v keep outbox-topic", h)
			}
			if h[publisher.HeaderTraceParent] != env.Headers[publisher.HeaderTraceParent] {
				t.Errorf("plain traceparent lost: %v", h)
			}
			if b.PartitionKey != (lower[lp+"partitionkey"] != "") {
				t.Errorf("partitionkey = %q with PartitionKey %v", lower[lp+"partitionkey"], b.PartitionKey)
			}
			ct := ""
			if b.ContentType == "" {
				ct = "application/json; charset=utf-8" // the protocol's property
				if _, ok := lower[lp+"datacontenttype"]; ok {
					t.Errorf("datacontenttype in the headers of %s: %v", b.Name, h)
				}
			}
			m, err := b.Decode(lower, ct, env.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != env.ID || m.Topic != env.Topic || m.Key != env.Key || m.ContentType != "application/json; charset=utf-8" || !bytes.Equal(m.Payload, env.Payload) {
				t.Errorf("decoded %+v", m)
			}
			if b.ContentType == publisher.HeaderContentType && h[b.ContentType] != "application/json; charset=utf-8" {
				t.Errorf("%s header %q, want the content type as it is", b.ContentType, h[b.ContentType])
			}
			for _, k := range []string{publisher.HeaderTopic, publisher.HeaderBusinessKey, publisher.HeaderContentType, publisher.HeaderTraceParent} {
				if m.Headers[k] != env.Headers[k] {
					t.Errorf("decoded header %s = %q, want %q", k, m.Headers[k], env.Headers[k])
				}
			}
		})
	}
}

func TestHeadersRefuseAttributeLikeNames(t *testing.T) {
	f := &outboxce.Format{Mode: outboxce.Binary}
	for _, c := range []struct {
		b      outboxce.Binding
		header string
	}{
		{outboxce.HTTP, "ce-id"},
		{outboxce.HTTP, "ce-x-y"},
		{outboxce.Kafka, "ce_source"},
		{outboxce.MQTT, "x-tenant"},
		{outboxce.MQTT, "subject"},
		{outboxce.AMQP, "cloudEvents:type"},
	} {
		env := envelope()
		env.Headers = map[string]string{publisher.HeaderContentType: "application/json", c.header: "v"}
		if _, err := f.Headers(c.b, env); err == nil || !strings.Contains(err.Error(), c.header) {
			t.Errorf("%s with header %q: err = %v", c.b.Name, c.header, err)
		}
	}
}

// TestOutboxExtensions: the claim-check and seal headers become valid,
// free extension attributes over MQTT, whose binding reads every user
// property as an attribute, and decode back under their own names; the
// other bindings carry them as plain headers, untouched both ways; a
// producer header named like one of those extensions is refused over
// MQTT, where it would pass for it.
func TestOutboxExtensions(t *testing.T) {
	outboxHeaders := map[string]string{
		claimcheck.HeaderRef:     "file:0190e6b4-8f3a-7c1e-9a4b-3f2d1c0b9a87." + strings.Repeat("ab", 32),
		claimcheck.HeaderSize:    "2048",
		claimcheck.HeaderSHA256:  strings.Repeat("ab", 32),
		seal.HeaderAlgorithm:     "aes-256-gcm",
		seal.HeaderKeyID:         "customer:42",
		seal.HeaderSealedHeaders: "q83vEjRWeJA+/w==",
	}
	exts := map[string]string{}
	for h := range outboxHeaders {
		ext, ok := outboxce.OutboxExtension(h)
		if !ok || !outboxce.ValidExtensionName(ext) {
			t.Fatalf("OutboxExtension(%q) = %q, %v: want a valid extension name", h, ext, ok)
		}
		if back, ok := outboxce.OutboxHeader(ext); !ok || back != h {
			t.Errorf("OutboxHeader(%q) = %q, %v; want %q", ext, back, ok, h)
		}
		for _, a := range []string{"specversion", "id", "source", "type", "time", "datacontenttype", "subject", "partitionkey", "traceparent", "tracestate", "dataschema"} {
			if ext == a {
				t.Errorf("%s is carried as the attribute %s", h, a)
			}
		}
		exts[ext] = h
	}
	if len(exts) != len(outboxHeaders) {
		t.Fatalf("two headers share an extension: %v", exts)
	}
	if _, ok := outboxce.OutboxExtension("x-tenant"); ok {
		t.Error("OutboxExtension maps a producer's header")
	}

	f := &outboxce.Format{Mode: outboxce.Binary, Source: "/documents"}
	for _, b := range []outboxce.Binding{outboxce.HTTP, outboxce.Kafka, outboxce.AMQP, outboxce.NATS, outboxce.MQTT} {
		t.Run(b.Name, func(t *testing.T) {
			env := envelope()
			env.Payload = nil
			env.Headers = map[string]string{publisher.HeaderContentType: "application/pdf", publisher.HeaderTopic: env.Topic}
			for k, v := range outboxHeaders {
				env.Headers[k] = v
			}
			lp := strings.ToLower(b.Prefix)
			if b.Prefix != "" { // a producer's own extension, free where the seal travels as a plain header
				env.Headers[b.Prefix+"outboxseal"] = "own-extension"
			}
			h, err := f.Headers(b, env)
			if err != nil {
				t.Fatal(err)
			}
			lower := map[string]string{}
			for k, v := range h {
				lower[strings.ToLower(k)] = v
			}
			for k, v := range outboxHeaders {
				ext, _ := outboxce.OutboxExtension(k)
				if b.Prefix == "" {
					if lower[ext] != v {
						t.Errorf("%s travels as %s = %q, want %q (headers %v)", k, ext, lower[ext], v, h)
					}
					if _, ok := lower[k]; ok {
						t.Errorf("%s travels under its own name: %v", k, h)
					}
				} else if lower[k] != v || ext != outboxce.ExtSeal && lower[lp+ext] != "" {
					t.Errorf("%s: %q, want it as a plain header %q (headers %v)", k, lower[k], v, h)
				}
			}
			if b.Prefix == "" {
				for k := range h {
					if !outboxce.ValidExtensionName(k) {
						t.Errorf("user property %q is no attribute name", k)
					}
				}
			}
			ct := ""
			if b.ContentType == "" {
				ct = "application/pdf"
			}
			m, err := b.Decode(lower, ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range outboxHeaders {
				if m.Headers[k] != v {
					t.Errorf("decoded %s = %q, want %q", k, m.Headers[k], v)
				}
			}
			if ref, ok, err := claimcheck.ParseHeaders(m.Headers); !ok || err != nil || ref.Size != 2048 {
				t.Errorf("the decoded reference: %+v %v %v", ref, ok, err)
			}
			if _, keyID, ok := seal.Sealed(m.Headers); !ok || keyID != "customer:42" {
				t.Errorf("the decoded seal: key %q, %v", keyID, ok)
			}
			if b.Prefix == "" {
				for ext := range exts {
					if _, ok := m.Headers[ext]; ok {
						t.Errorf("the extension %s is left in the decoded headers", ext)
					}
				}
			} else if m.Headers[lp+outboxce.ExtSeal] != "own-extension" {
				t.Errorf("a producer's ce-outboxseal header was taken for the seal: %v", m.Headers)
			}
		})
	}

	env := envelope()
	env.Headers = map[string]string{publisher.HeaderContentType: "application/json", "outboxsealkey": "k9"}
	if _, err := f.Headers(outboxce.MQTT, env); err == nil || !strings.Contains(err.Error(), `"outboxsealkey"`) || !strings.Contains(err.Error(), "outbox-seal-key") {
		t.Errorf("a producer header outboxsealkey over MQTT: err = %v", err)
	}
}

func TestStructuredRoundTrip(t *testing.T) {
	f := &outboxce.Format{Mode: outboxce.Structured}
	for _, c := range []struct {
		ct      string
		payload []byte
		member  string
	}{
		{"application/json", []byte(`{"a": [1, 2],  "b":"x"}`), `"data":{"a": [1, 2],  "b":"x"}`},
		{"text/plain", []byte("hello \"you\""), `"data":"hello \"you\""`},
		{"application/octet-stream", []byte{0xff, 0, 1}, `"data_base64":"/wAB"`},
		{"application/json", []byte("not json"), `"data_base64":"bm90IGpzb24="`},
	} {
		env := envelope()
		env.Headers[publisher.HeaderContentType] = c.ct
		env.Payload = c.payload
		body := f.Structured(env)
		if !bytes.Contains(body, []byte(c.member)) || !bytes.Contains(body, []byte(`"source":"/outbox"`)) {
			t.Errorf("%s: body %s lacks %s", c.ct, body, c.member)
		}
		h := f.StructuredHeaders(env)
		if h[publisher.HeaderContentType] != outboxce.StructuredContentType {
			t.Errorf("content-type = %q", h[publisher.HeaderContentType])
		}
		m, err := outboxce.DecodeStructured(h, body)
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != env.ID || m.Topic != env.Topic || m.Key != env.Key || m.ContentType != c.ct || !bytes.Equal(m.Payload, c.payload) {
			t.Errorf("%s: decoded %+v", c.ct, m)
		}
		if m.Headers[publisher.HeaderContentType] != c.ct || m.Headers[publisher.HeaderTraceParent] == "" {
			t.Errorf("%s: decoded headers %v", c.ct, m.Headers)
		}
	}
	if _, err := outboxce.DecodeStructured(nil, []byte(`{"id":"1","type":"t"}`)); err != outboxce.ErrNotEvent {
		t.Errorf("an object without specversion: %v", err)
	}
}
