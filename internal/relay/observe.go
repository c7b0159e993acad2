package relay

import (
	"context"

	"github.com/txoutbox/outbox/internal/store"
)

// startObserving starts the sampler and the alerts, when configured, for
// as long as ctx lasts.
func (r *Relay) startObserving(ctx context.Context) {
	if r.metrics != nil || (r.alerts != nil && r.alerts.cfg.OldestPendingAge > 0) {
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			r.sampleLoop(ctx)
		}()
	}
	if r.alerts != nil {
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			r.alerts.run(ctx)
		}()
	}
}

// recorded reports the outcomes of a settled round: metrics, a warning per
// dead letter, and the dead-letter alert.
func (r *Relay) recorded(items []*item) {
	if r.metrics != nil {
		r.metrics.observe(items, &r.clock)
	}
	var dead int
	var examples []AlertExample
	for _, it := range items {
		if it.out.Status != store.StatusDead {
			continue
		}
		dead++
		route := noRoute
		if it.route != nil {
			route = it.route.name
		}
		r.log.Warn("outbox relay: message dead", "relay", r.id, "route", route, "topic", it.row.Topic,
			"message_id", it.row.MessageID, "attempts", it.row.Attempts+btoi(it.out.CountAttempt), "error", it.out.Error)
		if len(examples) < maxAlertExamples {
			examples = append(examples, AlertExample{MessageID: it.row.MessageID, Topic: it.row.Topic, Error: it.out.Error})
		}
	}
	if dead > 0 && r.alerts != nil {
		r.alerts.deadLetters(dead, examples)
	}
}

// reportOwned sets this relay's share of outbox_owned_partitions to n.
// Relays sharing a registry each add their own share.
func (r *Relay) reportOwned(n int) {
	if r.metrics == nil || n == r.owned {
		return
	}
	r.metrics.owned.Add(float64(n - r.owned))
	r.owned = n
}
