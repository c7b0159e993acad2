package awswire_test

import (
	"bytes"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/internal/awswire"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// TestRoundTrip: what Encode writes, Decode reads back whole — the id,
// every header (those past the ten attributes, with a name no attribute
// takes or an empty value travel in the JSON attribute) and the payload,
// as text or as base64 where SQS could not carry it — within the limit of
// ten attributes.
func TestRoundTrip(t *testing.T) {
	headers := map[string]string{publisher.HeaderTopic: "order.created", publisher.HeaderContentType: "application/octet-stream", "x empty": "", "tenant:id": "acme"}
	for i := range 12 {
		headers[fmt.Sprintf("x-h%02d", i)] = strings.Repeat("v", i+1)
	}
	for _, c := range []struct {
		payload []byte
		base64  bool
	}{{[]byte(`{"id":1}`), false}, {[]byte{0xff, 0x00, 0x01}, true}, {[]byte("a\x00b"), true}, {[]byte("😀 ok"), false}} {
		env := &publisher.Envelope{ID: "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e", Payload: c.payload, Headers: headers}
		w, err := awswire.Encode(env, nil, outboxce.Binding{})
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Attrs) > awswire.MaxAttributes {
			t.Errorf("%d attributes, SQS takes %d", len(w.Attrs), awswire.MaxAttributes)
		}
		attrs := map[string]string{}
		for _, a := range w.Attrs {
			attrs[a.Name] = a.Value
		}
		if _, ok := attrs[awswire.AttrBodyEncoding]; ok != c.base64 {
			t.Errorf("payload %q: base64 %v, want %v", c.payload, ok, c.base64)
		}
		got, payload, err := awswire.Decode(attrs, w.Body)
		if err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(headers)
		want[awswire.AttrMessageID] = env.ID
		if !maps.Equal(got, want) || !bytes.Equal(payload, c.payload) {
			t.Errorf("round trip of %q: headers %v, payload %q", c.payload, got, payload)
		}
	}
}

func TestReservedHeaderRefused(t *testing.T) {
	for _, h := range []string{awswire.AttrMessageID, awswire.AttrBodyEncoding, awswire.AttrHeaders} {
		env := &publisher.Envelope{ID: "id-1", Payload: []byte("x"), Headers: map[string]string{h: "v"}}
		if _, err := awswire.Encode(env, nil, outboxce.Binding{}); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("header %s: %v, want it refused as reserved", h, err)
		}
	}
	if _, _, err := awswire.Decode(map[string]string{awswire.AttrBodyEncoding: "rot13"}, "x"); err == nil {
		t.Error("an unknown body encoding was read")
	}
}

func TestSplit(t *testing.T) {
	size := func(n int) int { return n }
	for _, c := range []struct {
		items []int
		want  string
	}{
		{nil, "[]"},
		{[]int{1, 1, 1, 1, 1}, "[[1 1] [1 1] [1]]"}, // at most 2 a call
		{[]int{4, 5, 1}, "[[4] [5 1]]"},             // at most 6 bytes a call
		{[]int{9, 1, 1}, "[[9] [1 1]]"},             // one over the bytes goes alone
		{[]int{1, 9}, "[[1] [9]]"},
	} {
		if got := fmt.Sprint(awswire.Split(c.items, size, 2, 6)); got != c.want {
			t.Errorf("Split(%v) = %s, want %s", c.items, got, c.want)
		}
	}
}
