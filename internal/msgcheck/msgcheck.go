// Package msgcheck holds the rules a message's topic, business key and
// header names follow. The producer applies them before a row is written;
// the relay applies them again to every row it reads, since rows written
// with plain SQL have not been through the producer.
package msgcheck

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxFieldLen is the longest topic, business key and header name, in bytes.
const MaxFieldLen = 255

// TopicRule says what a topic must look like, for error messages.
const TopicRule = "want dot-separated segments of letters, digits, '_', '-', ':' (1-255 chars)"

// ReservedPrefix starts the header names the relay sets itself.
const ReservedPrefix = "outbox-"

// Topic reports whether t is dot-separated non-empty segments of
// [A-Za-z0-9_:-], at most MaxFieldLen bytes. A topic that passes is valid
// UTF-8, has no '/', '#', '+', '*', '>' or spaces, so it maps to exactly
// one level per segment on every broker.
func Topic(t string) bool {
	if t == "" || len(t) > MaxFieldLen {
		return false
	}
	seg := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '.':
			if seg == 0 {
				return false
			}
			seg = 0
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == ':':
			seg++
		default:
			return false
		}
	}
	return seg > 0
}

// TopicError explains why t is not a valid topic ("" when it is).
func TopicError(t string) string {
	switch {
	case Topic(t):
		return ""
	case t == "":
		return "topic is required"
	}
	return "invalid topic " + Quote(t) + ": " + TopicRule
}

// KeyError explains why k is not a valid business key ("" when it is).
func KeyError(k string) string {
	switch {
	case len(k) > MaxFieldLen:
		return "longer than 255 bytes"
	case !utf8.ValidString(k) || strings.ContainsRune(k, 0):
		return "not UTF-8 text"
	}
	return ""
}

// HeaderName reports whether n can name a header: 1-255 printable ASCII
// characters other than space and ':'.
func HeaderName(n string) bool {
	if n == "" || len(n) > MaxFieldLen {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	return true
}

// Reserved reports whether the lower-case header name n belongs to the
// relay, which sets it from the row's own columns.
func Reserved(n string) bool { return strings.HasPrefix(n, ReservedPrefix) }

// Quote renders s for an error message: Go-quoted, so invalid UTF-8 and
// control characters show as escapes, and cut to 64 bytes.
func Quote(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strconv.Quote(s)
}
