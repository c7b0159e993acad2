package relay

import (
	"strconv"

	"github.com/txoutbox/outbox/internal/store"
)

// unrouted decides a row that no route of this relay matches.
func (r *Relay) unrouted(it *item) *item {
	it.decided = true
	it.out = store.Outcome{ID: it.row.ID, Status: store.StatusDead, Error: "no route for topic " + strconv.Quote(it.row.Topic), CountAttempt: true}
	return it
}
