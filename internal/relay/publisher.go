package relay

import "github.com/txoutbox/outbox/publisher"

// SetPublisher makes p the route's publisher, taking runs of a key when p
// says it does (publisher.RunPublisher), and c its checker: p itself when
// c is nil and p is a publisher.Checker (outbox.Route.Checker).
func (r *Route) SetPublisher(p publisher.Publisher, c publisher.Checker) {
	if p != nil {
		r.Publisher = p
		rp, ok := p.(publisher.RunPublisher)
		r.Runs = ok && rp.PublishesRuns()
	}
	if c == nil {
		c, _ = p.(publisher.Checker)
	}
	if c != nil {
		r.Checker = c
	}
}
