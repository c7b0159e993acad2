package relay

import (
	"strconv"
	"sync"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// Topics no route matches.
//
// Relays on one database may route differently for a while: in a rolling
// deploy the new version adds a route that the old one lacks, and a
// message in a partition the old one holds finds no route there. That is
// not the message's fault, so it does not go dead at once. Each relay
// records its route patterns with its heartbeat (store.Heartbeat); a
// relay with no route for a topic looks at the other live relays:
//
//   - none routes it, and every one's routes are known: the message is
//     dead, "no route for topic …", as on a relay that runs alone;
//   - another routes it, or one's routes are unknown (a relay of an
//     earlier version): the message waits,
//     pending and uncharged, and its key with it, while the relays
//     disagree — until the relay that routes it holds its partition (the
//     old version stops), or every live relay agrees it has no route
//     (the new version stops), or the topic has waited NoRouteGrace on
//     this relay, when it is dead with the reason.
//
// The relay logs each topic that waits once.

// unroutedWait is how long a message no route of this relay matches waits
// before it is read again, while another relay may route it.
const unroutedWait = 2 * time.Second

// maxUnroutedTopics bounds the topics whose wait is remembered; a topic
// beyond it is dead as if its grace had run out.
const maxUnroutedTopics = 10000

// peers is what the relay knows of the live relays on its database,
// from its last heartbeat.
type peers struct {
	mu     sync.Mutex
	relays []store.Relay // nil before the first heartbeat, when the relay holds no partition yet
	// since is when each waiting topic first found no route here.
	since map[string]time.Time
}

// set records the live relays of a heartbeat.
func (p *peers) set(relays []store.Relay) {
	p.mu.Lock()
	p.relays = relays
	p.mu.Unlock()
}

// unrouted decides a row that no route of this relay matches.
func (r *Relay) unrouted(it *item) *item {
	row := it.row
	it.decided = true
	dead := func(msg string) *item {
		it.out = store.Outcome{ID: row.ID, Status: store.StatusDead, Error: msg, CountAttempt: true}
		return it
	}
	noRoute := "no route for topic " + strconv.Quote(row.Topic)
	other, waited, first, over := r.peers.routedElsewhere(r.id, row.Topic, r.cfg.NoRouteGrace)
	switch {
	case other == "":
		return dead(noRoute)
	case over:
		return dead(noRoute + " on relay " + r.id + "; relay " + other + " may route it, but the relays did not agree within " + r.cfg.NoRouteGrace.String())
	}
	if first {
		r.log.Warn("outbox relay: no route for a topic that another live relay may route; its messages wait here, uncharged, while the relays' routes differ",
			"relay", r.id, "topic", row.Topic, "other_relay", other, "grace", r.cfg.NoRouteGrace)
	}
	it.out = store.Outcome{ID: row.ID, Status: store.StatusPending, Delay: min(unroutedWait, r.cfg.NoRouteGrace-waited),
		Error: noRoute + " on relay " + r.id + "; waiting, as relay " + other + " may route it", Unknown: it.uncertain()}
	return it
}

// routedElsewhere reports a live relay other than self that routes topic
// or whose routes are unknown ("" when none), how long topic has waited
// on this relay, whether this is its first wait, and whether the wait has
// run past grace.
func (p *peers) routedElsewhere(self, topic string, grace time.Duration) (other string, waited time.Duration, first, over bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rl := range p.relays {
		if rl.ID == self || other != "" {
			continue
		}
		if !rl.RoutesKnown {
			other = rl.ID
			continue
		}
		for _, pat := range rl.Routes {
			if MatchTopic(pat, topic) {
				other = rl.ID
				break
			}
		}
	}
	if other == "" {
		delete(p.since, topic)
		return "", 0, false, false
	}
	now := time.Now()
	since, ok := p.since[topic]
	if !ok {
		if len(p.since) >= maxUnroutedTopics {
			return other, grace, false, true
		}
		if p.since == nil {
			p.since = map[string]time.Time{}
		}
		p.since[topic], since, first = now, now, true
	}
	waited = now.Sub(since)
	return other, waited, first, waited >= grace
}

// routePatterns are the patterns of routes, in order, as the relay
// records them with its heartbeat.
func routePatterns(routes []Route) string {
	ps := make([]string, len(routes))
	for i, rt := range routes {
		ps[i] = rt.Pattern
	}
	return store.EncodeRoutes(ps)
}
