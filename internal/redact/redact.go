// Package redact hides credentials in URLs for logs and errors.
package redact

import (
	"net/url"
	"strings"
)

// URL returns rawURL with its userinfo and secret-looking query values
// replaced by "xxxxx". It works on strings that do not parse as URLs too.
func URL(rawURL string) string {
	s := rawURL
	var b strings.Builder
	start := -1
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	} else if strings.HasPrefix(s, "//") {
		start = 2
	}
	if start >= 0 {
		b.WriteString(s[:start])
		s = s[start:]
		end := strings.IndexAny(s, "/?#")
		if end < 0 {
			end = len(s)
		}
		// A password with an unescaped '/', '?' or '#' may break the URL or,
		// worse, parse as host and path ("user:123/rest@host"): unless the
		// parser found the userinfo itself, hide everything up to the last
		// '@'. A legitimate '@' later in a URL without userinfo is masked
		// too; over-hiding is the safe side.
		if u, err := url.Parse(rawURL); err != nil || u.User == nil {
			if at := strings.LastIndexByte(s, '@'); at >= end {
				end = at + 1
			}
		}
		auth := s[:end]
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			switch user, _, ok := strings.Cut(auth[:at], ":"); {
			case ok && user != "":
				b.WriteString(user + ":xxxxx")
			case at > 0:
				b.WriteString("xxxxx")
			}
			auth = auth[at:]
		}
		b.WriteString(auth)
		s = s[end:]
	}
	q := strings.IndexByte(s, '?')
	if q < 0 {
		b.WriteString(s)
		return b.String()
	}
	b.WriteString(s[:q+1])
	s = s[q+1:]
	frag := ""
	if h := strings.IndexByte(s, '#'); h >= 0 {
		s, frag = s[:h], s[h:]
	}
	for i, pair := range strings.Split(s, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		name, _, hasValue := strings.Cut(pair, "=")
		if hasValue && secretParam(name) {
			b.WriteString(name + "=xxxxx")
		} else {
			b.WriteString(pair)
		}
	}
	b.WriteString(frag)
	return b.String()
}

// secretParam reports whether a query parameter name looks like it holds
// a secret.
func secretParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, w := range []string{"pass", "pwd", "secret", "token", "key", "auth", "sig", "cred", "session"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// Text hides the credentials of every URL that appears in s, a free-form
// message such as a publisher's error, which often quotes the URL it
// failed on.
func Text(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := strings.LastIndexAny(s[:i], " \t\n\"'`<>()[]{},;=") + 1
		end := i + 3
		if n := strings.IndexAny(s[end:], " \t\n\"'`<>"); n >= 0 {
			end += n
		} else {
			end = len(s)
		}
		b.WriteString(s[:start])
		b.WriteString(URL(s[start:end]))
		s = s[end:]
	}
}
