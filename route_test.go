package outbox_test

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
)

func TestMatchTopic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, topic string
		want           bool
	}{
		// Exact.
		{"order.created", "order.created", true},
		{"order.created", "order.updated", false},
		{"order.created", "order", false},
		{"order", "order.created", false},
		{"order", "order", true},
		// "*" matches exactly one segment.
		{"order.*", "order.created", true},
		{"order.*", "order.created.v2", false},
		{"order.*", "order", false},
		{"order.*", "orders.created", false},
		{"*.created", "order.created", true},
		{"*.created", "order.updated", false},
		{"*.created", "created", false},
		{"order.*.v2", "order.created.v2", true},
		{"order.*.v2", "order.created.v3", false},
		{"*.*", "a.b", true},
		{"*.*", "a", false},
		{"*.*", "a.b.c", false},
		// ">" matches one or more trailing segments.
		{"order.>", "order.created", true},
		{"order.>", "order.created.v2", true},
		{"order.>", "order", false},
		{"order.>", "orders.created", false},
		{"order.*.>", "order.created.v2.eu", true},
		{"order.*.>", "order.created", false},
		{">", "anything", true},
		{">", "any.thing.at.all", true},
		// "*" alone matches every topic, however many segments.
		{"*", "order", true},
		{"*", "order.created", true},
		{"*", "a.b.c.d.e", true},
		// Case matters; no partial-segment wildcards.
		{"Order.*", "order.created", false},
		{"ord*", "order", false},
	} {
		if got := outbox.MatchTopic(tc.pattern, tc.topic); got != tc.want {
			t.Errorf("MatchTopic(%q, %q) = %v, want %v", tc.pattern, tc.topic, got, tc.want)
		}
	}
}

func TestValidatePattern(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"*", ">", "order", "order.created", "order.*", "order.>", "*.created", "order.*.>", "a-b_c:d.*", "*.*.*"} {
		if err := outbox.ValidatePattern(p); err != nil {
			t.Errorf("ValidatePattern(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"", ".", "order.", ".order", "order..created", "order.>.x", ">.order", "ord*", "order.cre>", "order created", "order/created", "**", "order.**", "ordér"} {
		err := outbox.ValidatePattern(p)
		if err == nil {
			t.Errorf("ValidatePattern(%q) = nil, want an error", p)
			continue
		}
		if !strings.Contains(err.Error(), "invalid route pattern") {
			t.Errorf("ValidatePattern(%q) = %q, want it to say invalid route pattern", p, err)
		}
	}
}

// refTopic is the topic grammar of the contract: dot-separated non-empty
// segments of letters, digits, '_', '-' and ':', at most 255 characters.
func refTopic(t string) bool {
	if t == "" || len(t) > 255 {
		return false
	}
	for _, seg := range strings.Split(t, ".") {
		if seg == "" {
			return false
		}
		for _, c := range []byte(seg) {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':'
			if !ok {
				return false
			}
		}
	}
	return true
}

// refMatch is MatchTopic written the obvious way, segment by segment.
func refMatch(pattern, topic string) bool {
	if pattern == "*" {
		return true
	}
	ps, ts := strings.Split(pattern, "."), strings.Split(topic, ".")
	for i, p := range ps {
		if p == ">" {
			return len(ts) > i
		}
		if i >= len(ts) || (p != "*" && p != ts[i]) {
			return false
		}
	}
	return len(ps) == len(ts)
}

func FuzzMatchTopic(f *testing.F) {
	for _, s := range [][2]string{
		{"order.*", "order.created"},
		{"order.>", "order.created.v2"},
		{"*", "a.b.c"},
		{">", "a"},
		{"*.created", "order.created"},
		{"order.*.>", "order.x"},
		{"", ""},
		{"a..b", "a..b"},
		{"order.>.x", "order.a.x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, topic string) {
		got := outbox.MatchTopic(pattern, topic) // must not panic on any input
		verr := outbox.ValidatePattern(pattern)
		if verr == nil && pattern != "*" {
			// A valid pattern is valid topic segments, '*' or a final '>'.
			for i, seg := range strings.Split(pattern, ".") {
				if seg != "*" && seg != ">" && !refTopic(seg) {
					t.Fatalf("ValidatePattern(%q) accepted segment %d %q", pattern, i, seg)
				}
			}
			if strings.Contains(strings.TrimSuffix(pattern, ">"), ">") {
				t.Fatalf("ValidatePattern(%q) accepted a '>' that is not last", pattern)
			}
		}
		if verr != nil || !refTopic(topic) {
			return
		}
		if want := refMatch(pattern, topic); got != want {
			t.Fatalf("MatchTopic(%q, %q) = %v, want %v", pattern, topic, got, want)
		}
		// A topic used as a pattern matches itself and nothing else.
		if !outbox.MatchTopic(topic, topic) {
			t.Fatalf("MatchTopic(%q, itself) = false", topic)
		}
	})
}
