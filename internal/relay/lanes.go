package relay

import (
	"context"
	"hash/maphash"

	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/store"
)

// Lanes: waves per group of keys.
//
// A key's messages go out one per wave, each wave waiting for the
// confirmations of the one before, so a batch holding few keys takes as
// many round trips to its destination as its busiest key has messages.
// When every wave of a batch waited for the whole previous wave, each
// round trip cost as much as the slowest confirmation among all keys. So
// a batch of more than one wave is split into lanes, groups of keys whose
// waves follow each other on their own: a lane's second wave starts when
// its own first wave is confirmed. Per-key order is what it was (a key
// lives in one lane, its messages in id order, one per wave, and a key
// whose message failed sits out the rest of the round); the round still
// settles once, after every lane.

// maxLanes is the most keys a batch of several waves may hold for each
// key to get a lane of its own. Lanes are for few keys, each with a long
// run of waves in the batch. A batch of more keys has few waves, each of
// many messages: they go together, a call of the whole wave each, which
// costs the relay, the connection and the destination less per message
// than the same messages in a lane's calls of a few keys each (the
// 1,000-key drain to NATS ran 4 % faster and the relay process spent
// 10 % less CPU per message; BENCHMARKS.md).
const maxLanes = 32

var laneSeed = maphash.MakeSeed()

// lanes splits the undecided items into lanes of waves: one lane when
// every message fits in one wave or the batch holds more than maxLanes
// keys, else as many lanes as keys, the keys hashed over them and the
// keyless messages spread over their first waves. A key's
// consecutive messages for a route that publishes runs share a wave: they
// go in one call (see Route.Runs). A key whose message was put back
// before publishing (decided pending, e.g. a topic no route here matches)
// keeps its later messages out of the round: they stay undecided.
func lanes(items []*item) [][][]*item {
	type last struct {
		wave  int
		route *routeState
	}
	keys := map[string]last{}
	waves := make([]int, len(items))
	deep := false
	var waiting map[string]int // key → index of its first message put back
	held := func(i int, it *item) bool {
		w, ok := waiting[it.row.Key]
		return ok && it.row.HasKey && i > w
	}
	for i, it := range items {
		if it.row.HasKey && it.decided && it.out.Status == store.StatusPending {
			if _, ok := waiting[it.row.Key]; !ok {
				if waiting == nil {
					waiting = map[string]int{}
				}
				waiting[it.row.Key] = i
			}
		}
		if it.decided || !it.row.HasKey || held(i, it) {
			continue
		}
		k, ok := keys[it.row.Key]
		switch {
		case !ok:
			k = last{0, it.route}
		case k.route == it.route && it.route != nil && it.route.Runs:
		default:
			k = last{k.wave + 1, it.route}
			deep = true
		}
		keys[it.row.Key] = k
		waves[i] = k.wave
	}
	n := 1
	if deep && len(keys) <= maxLanes {
		n = max(len(keys), 1)
	}
	out := make([][][]*item, n)
	free := 0
	for i, it := range items {
		if it.decided || held(i, it) {
			continue
		}
		l, w := free%n, waves[i]
		if it.row.HasKey {
			l = int(maphash.String(laneSeed, it.row.Key) % uint64(n))
		} else {
			free++
		}
		for len(out[l]) <= w {
			out[l] = append(out[l], nil)
		}
		out[l][w] = append(out[l][w], it)
	}
	return out
}

// runLane publishes one lane's waves in turn, from wave start on (the
// waves before it were published already).
func (r *Relay) runLane(ctx context.Context, waves [][]*item, start int, rd *delivery) {
	blocked := map[string]bool{}
	for i, wave := range waves {
		var todo []*item
		if i >= start {
			if rd.aborted.Load() || !r.own.valid() || (i > 0 && failpoint.Inject(failpoint.MidBatch) != nil) {
				return
			}
			for _, it := range wave {
				if it.row.HasKey && blocked[it.row.Key] {
					continue
				}
				todo = append(todo, it)
			}
			r.check(ctx, todo)
			r.publishWave(ctx, todo, rd)
		} else {
			todo = wave
		}
		for _, it := range todo {
			if it.row.HasKey && (!it.decided || it.out.Status == store.StatusPending) {
				blocked[it.row.Key] = true
			}
		}
	}
}
