// Package redact hides credentials in URLs and connection strings for
// logs and errors.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// URL returns rawURL with its userinfo and secret-looking query values
// replaced by "xxxxx". It works on strings that do not parse as URLs too,
// and on the connection strings databases take without a scheme:
// "user:pw@host/db", a MySQL DSN "user:pw@tcp(host:3306)/db", and
// PostgreSQL's keyword/value form "host=db password=pw" (secret-looking
// keywords' values hidden).
func URL(rawURL string) string {
	s := rawURL
	var b strings.Builder
	start := -1
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	} else if strings.HasPrefix(s, "//") {
		start = 2
	} else if keywordValue.MatchString(s) {
		return secretValue.ReplaceAllString(s, "${1}xxxxx")
	} else if at := strings.LastIndexByte(s, '@'); at >= 0 {
		// No scheme: everything before the last '@' is the userinfo.
		masked := "xxxxx"
		if user, _, ok := strings.Cut(s[:at], ":"); ok && user != "" {
			masked = user + ":xxxxx"
		}
		return masked + strings.TrimPrefix(URL("//"+s[at:]), "//")
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

// secretWords are the parts of a parameter name that mark it secret.
var secretWords = []string{"pass", "pwd", "secret", "token", "key", "auth", "sig", "cred", "session"}

// secretParam reports whether a query parameter name looks like it holds
// a secret.
func secretParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// keywordValue matches a keyword/value connection string (libpq's
// "host=db user=app password=pw"): it starts with a keyword and '='.
var keywordValue = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

// secretValue matches a secret-looking keyword and its value, plain or
// single-quoted with backslash escapes; group 1 is the keyword and '='.
var secretValue = regexp.MustCompile(`(?i)(\b[a-z0-9_]*(?:` + strings.Join(secretWords, "|") + `)[a-z0-9_]*\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|\S*)`)

// Password returns the password in raw, a URL or one of the connection
// strings URL knows, or "" when it holds none.
func Password(raw string) string {
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return ""
		}
		if p, ok := u.User.Password(); ok {
			return p
		}
		return u.Query().Get("password")
	}
	if keywordValue.MatchString(raw) {
		m := passwordValue.FindStringSubmatch(raw)
		if m == nil {
			return ""
		}
		v := m[1]
		if strings.HasPrefix(v, "'") {
			v = strings.ReplaceAll(strings.Trim(v, "'"), `\'`, "'")
		}
		return v
	}
	at := strings.LastIndexByte(raw, '@')
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(raw[:at], ":")
	return pw
}

// passwordValue matches the password keyword of a keyword/value string.
var passwordValue = regexp.MustCompile(`(?i)\bpassword\s*=\s*('(?:[^'\\]|\\.)*'?|\S*)`)

// Text hides credentials in s, a free-form message such as a publisher's
// error or a receiver's response body, before it is logged or stored as
// last_error: the userinfo and secret query values of every URL in it,
// the value after a secret-looking name ("password=…", "token": "…",
// "Authorization: …", "api_key: …"), Bearer and Basic credentials, and
// JSON Web Tokens.
func Text(s string) string {
	if strings.Contains(s, "://") {
		s = urls(s)
	}
	s = namedSecret.ReplaceAllString(s, "${1}xxxxx")
	s = schemeSecret.ReplaceAllString(s, "${1}xxxxx")
	return jwt.ReplaceAllString(s, "xxxxx")
}

// namedSecret matches a secret-looking name, its ':' or '=' (quoted as in
// JSON or not) and its value; group 1 is all but the value.
var namedSecret = regexp.MustCompile(`(?i)([\w-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|authorization|cookie|session[_-]?id|credentials?)[\w-]*["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token)\s+)?[^\s"',;&}\]]+`)

// schemeSecret matches an HTTP credential after its scheme.
var schemeSecret = regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{6,}`)

// jwt matches a JSON Web Token.
var jwt = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)

// urls hides the credentials of every URL that appears in s.
func urls(s string) string {
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
