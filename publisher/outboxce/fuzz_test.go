package outboxce_test

import (
	"testing"
	"unicode/utf8"

	"github.com/txoutbox/outbox/publisher/outboxce"
)

// FuzzEscape: Unescape undoes Escape for any UTF-8 string, and Escape's
// output is printable ASCII without space, '"' or a stray '%'.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "order.created", "Euro € 😀", `50% "off"`, "\x00\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		e := outboxce.Escape(s)
		for i := 0; i < len(e); i++ {
			if c := e[i]; c <= ' ' || c >= 0x7f || c == '"' {
				t.Fatalf("Escape(%q) = %q has byte %q", s, e, c)
			}
		}
		back, err := outboxce.Unescape(e)
		if err != nil || back != s {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", s, back, err)
		}
	})
}

// FuzzDecodeStructured: a body from the network never panics the
// structured decoder, and what it accepts has an id and a type.
func FuzzDecodeStructured(f *testing.F) {
	f.Add([]byte(`{"specversion":"1.0","id":"1","type":"t","source":"/s","data":{"a":1}}`))
	f.Add([]byte(`{"specversion":"1.0","id":"1","type":"t","datacontenttype":"text/plain","data":"x"}`))
	f.Add([]byte(`{"specversion":"1.0","id":"1","type":"t","data_base64":"AAE="}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := outboxce.DecodeStructured(map[string]string{}, body)
		if err == nil && (m.ID == "" || m.Topic == "") {
			t.Fatalf("accepted %q without id or type", body)
		}
	})
}
