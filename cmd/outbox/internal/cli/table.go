package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// table writes aligned columns. Every cell goes through escapeCell, so
// values from the database (topics, keys, errors written by any producer)
// cannot move the cursor, recolour or clear an operator's terminal, nor
// break the columns.
type table struct {
	tw *tabwriter.Writer
}

// newTable starts a table on w, with header as its first row when given.
func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row writes one row.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if i > 0 {
			_, _ = io.WriteString(t.tw, "\t")
		}
		_, _ = io.WriteString(t.tw, escapeCell(c))
	}
	_, _ = io.WriteString(t.tw, "\n")
}

// flush writes the aligned table out.
func (t *table) flush() { _ = t.tw.Flush() }

// escapeCell renders s as one printable cell: control characters (tabs and
// line breaks included), Unicode format characters that reorder text
// (bidirectional overrides) and bytes that are not UTF-8 are written as Go
// escapes (\x1b, \u202e, \xff).
func escapeCell(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unprintable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unprintable(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unprintable(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unprintable reports whether r is a control or format character.
func unprintable(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}
