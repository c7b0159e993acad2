package msgcheck

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTopic(t *testing.T) {
	for topic, want := range map[string]bool{
		"order.created": true, "a": true, "x:y-z_1.B": true, strings.Repeat("a", 255): true,
		"": false, ".a": false, "a.": false, "a..b": false, "order.x/admin/cmd": false, "a b": false,
		"order.*": false, "order.>": false, "a+b": false, "a#b": false, "order.\xff\xfe": false, strings.Repeat("a", 256): false,
	} {
		if got := Topic(topic); got != want {
			t.Errorf("Topic(%q) = %v, want %v", topic, got, want)
		}
		if got := TopicError(topic) == ""; got != want {
			t.Errorf("TopicError(%q) = %q", topic, TopicError(topic))
		}
	}
	if TopicError("") != "topic is required" {
		t.Errorf("TopicError(\"\") = %q", TopicError(""))
	}
}

func TestKeyAndHeaderName(t *testing.T) {
	for key, want := range map[string]string{"": "", "order-42": "", "k\xff": "not UTF-8 text", "a\x00b": "not UTF-8 text", strings.Repeat("k", 256): "longer than 255 bytes"} {
		if got := KeyError(key); got != want {
			t.Errorf("KeyError(%q) = %q, want %q", key, got, want)
		}
	}
	for name, want := range map[string]bool{"x-tenant": true, "traceparent": true, "": false, "bad name": false, "a:b": false, "é": false, "a\nb": false} {
		if got := HeaderName(name); got != want {
			t.Errorf("HeaderName(%q) = %v, want %v", name, got, want)
		}
	}
	if !Reserved("outbox-topic") || Reserved("x-outbox-topic") {
		t.Error("Reserved: only names starting with outbox- are the relay's")
	}
}

// FuzzTopic: a valid topic is always UTF-8 and never holds a character
// that a broker reads as a level separator or wildcard.
func FuzzTopic(f *testing.F) {
	for _, s := range []string{"order.created", "order.x/admin/cmd", "a..b", "order.\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !Topic(s) {
			if TopicError(s) == "" {
				t.Fatalf("TopicError(%q) is empty for an invalid topic", s)
			}
			return
		}
		if !utf8.ValidString(s) || strings.ContainsAny(s, "/#+*> \x00") || len(s) > MaxFieldLen {
			t.Fatalf("Topic(%q) accepted a topic a broker would misread", s)
		}
	})
}
