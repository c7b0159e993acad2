package cli

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestEscapeCell(t *testing.T) {
	for in, want := range map[string]string{
		"order.created":        "order.created",
		"héllo ✓":              "héllo ✓",
		"\x1b[2Jcleared":       `\x1b[2Jcleared`,
		"a\tb\nc\rd":           `a\x09b\x0ac\x0dd`,
		"bell\x07 del\x7f":     `bell\x07 del\x7f`,
		"bad\xff\xfe":          `bad\xff\xfe`,
		"rtl\u202eevil\u2066x": `rtl\u202eevil\u2066x`,
		"c1\u009bx":            `c1\u009bx`,
	} {
		if got := escapeCell(in); got != want {
			t.Errorf("escapeCell(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTablesEscapeControlCharacters: terminal escape sequences a foreign
// producer wrote into a topic, key or error reach 'dead list' and
// 'status' as visible escapes, never as raw control bytes.
func TestTablesEscapeControlCharacters(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	db.Exec(t, "INSERT INTO outbox_messages (topic, business_key, payload, status, last_error) VALUES (?, ?, '{}', 'dead', ?)",
		"order.\x1b[2J", "k\x1b]0;owned\x07", "\x1b[31mred\u202e")
	for _, args := range [][]string{{"dead", "list"}, {"status"}} {
		out := run(t, vars, args...).ok(t).stdout
		if strings.ContainsAny(out, "\x1b\x07\u202e") {
			t.Errorf("%v printed raw control characters: %q", args, out)
		}
		if !strings.Contains(out, `order.\x1b[2J`) {
			t.Errorf("%v does not show the topic escaped: %q", args, out)
		}
	}
	if out := run(t, vars, "dead", "list").stdout; !strings.Contains(out, `k\x1b]0;owned\x07`) || !strings.Contains(out, `\x1b[31mred\u202e`) {
		t.Errorf("dead list does not show key and error escaped: %q", out)
	}
}
