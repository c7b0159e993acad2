package relay

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox/internal/redact"
)

// breaker is a route's circuit breaker.
type breaker struct {
	mu        sync.Mutex
	openUntil time.Time
	pauses    int
	lastErr   string

	circuit prometheus.Gauge // outbox_circuit_open of the route; nil without metrics
}

// Circuit breaker: a route whose destination is unavailable pauses for a
// growing interval (1 s doubling to 5 s); the first batch after the pause
// is the probe. The cap bounds how long deliveries wait once the
// destination is back. While every route is paused the relay reads
// nothing (see round), so a long outage costs a probe every 5 s, not a
// rewrite of the backlog.
const (
	pauseBase = time.Second
	pauseMax  = 5 * time.Second
)

// allPaused reports whether every route is paused.
func (rt *router) allPaused() bool {
	for _, rs := range rt.routes {
		if wait, _ := rs.breaker.paused(); wait <= 0 {
			return false
		}
	}
	return len(rt.routes) > 0
}

func (b *breaker) paused() (time.Duration, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Until(b.openUntil), b.lastErr
}

// pauseFor is how long the route will stay paused once tripped.
func (b *breaker) pauseFor() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := pauseBase << min(b.pauses, 3)
	return min(d, pauseMax)
}

// trip pauses the route and returns for how long, and whether it was
// running before.
func (b *breaker) trip(err error) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := min(pauseBase<<min(b.pauses, 3), pauseMax)
	b.openUntil = time.Now().Add(d)
	b.lastErr = redact.Text(oneLine(err.Error()))
	b.pauses++
	opened := b.pauses == 1
	if opened && b.circuit != nil {
		b.circuit.Add(1)
	}
	return d, opened
}

// reset closes the breaker and reports whether it was open.
func (b *breaker) reset() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.pauses > 0
	b.pauses = 0
	b.openUntil = time.Time{}
	if was && b.circuit != nil {
		b.circuit.Add(-1)
	}
	return was
}

func (b *breaker) lastError() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastErr
}
