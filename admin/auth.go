package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// authorize checks the request's bearer token and returns the name of the
// token it carries ("" for an anonymous read). When it returns false it
// has answered: 401 for a missing (while tokens are configured), malformed
// or unknown token, 403 for a change while no token is configured.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, mutation bool) (string, bool) {
	header := r.Header.Get("Authorization")
	if header == "" {
		if len(s.tokens) > 0 {
			unauthorized(w, "missing Authorization: Bearer <token>")
			return "", false
		}
		if mutation {
			writeError(w, http.StatusForbidden, "changes are refused: no admin token is configured (set OUTBOX_ADMIN_TOKEN or admin_tokens)")
			return "", false
		}
		return "", true
	}
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		unauthorized(w, "the Authorization header must be \"Bearer <token>\"")
		return "", false
	}
	name, found := s.match(token)
	if !found {
		unauthorized(w, "unknown token")
		return "", false
	}
	return name, true
}

// match compares token with every configured token in constant time,
// without stopping at the first match, so the time taken tells nothing
// about which token (if any) matched. Hashing first makes the lengths
// equal.
func (s *Server) match(token string) (string, bool) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range s.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], s.tokens[i].sum[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return "", false
	}
	return s.tokens[found].name, true
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="outbox admin"`)
	writeError(w, http.StatusUnauthorized, msg)
}
