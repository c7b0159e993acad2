package relay

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/txoutbox/outbox/internal/msgcheck"
)

// errBadPattern is wrapped by every pattern validation error.
var errBadPattern = errors.New("invalid route pattern")

// ValidatePattern reports whether p is a well-formed route pattern (see
// outbox.Route).
func ValidatePattern(p string) error {
	if p == "*" {
		return nil
	}
	if p == "" {
		return fmt.Errorf("%w: empty", errBadPattern)
	}
	segs := strings.Split(p, ".")
	for i, s := range segs {
		switch {
		case s == "*":
		case s == ">":
			if i != len(segs)-1 {
				return fmt.Errorf("%w %q: '>' must be the last segment", errBadPattern, p)
			}
		case !msgcheck.Topic(s):
			return fmt.Errorf("%w %q: segment %q", errBadPattern, p, s)
		}
	}
	return nil
}

// MatchTopic reports whether topic matches pattern (see outbox.Route).
func MatchTopic(pattern, topic string) bool {
	if pattern == "*" {
		return true
	}
	for {
		pseg, prest, pmore := strings.Cut(pattern, ".")
		tseg, trest, tmore := strings.Cut(topic, ".")
		switch {
		case pseg == ">":
			return tseg != ""
		case pseg != "*" && pseg != tseg:
			return false
		case tseg == "":
			return false
		}
		if !pmore || !tmore {
			return pmore == tmore
		}
		pattern, topic = prest, trest
	}
}

// router picks the route of a topic, caching answers; workers share it.
type router struct {
	routes []*routeState
	mu     sync.RWMutex
	cache  map[string]*routeState
}

func (r *router) lookup(topic string) *routeState {
	r.mu.RLock()
	rs, ok := r.cache[topic]
	r.mu.RUnlock()
	if ok {
		return rs
	}
	var found *routeState
	for _, rs := range r.routes {
		if MatchTopic(rs.Pattern, topic) {
			found = rs
			break
		}
	}
	r.mu.Lock()
	if len(r.cache) < 10000 {
		r.cache[topic] = found
	}
	r.mu.Unlock()
	return found
}
