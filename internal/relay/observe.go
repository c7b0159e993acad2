package relay

import (
	"context"
	"strings"

	"github.com/txoutbox/outbox/internal/msgcheck"
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
		topic, id := bounded(it.row.Topic), bounded(it.row.MessageID)
		r.log.Warn("outbox relay: message dead", "relay", r.id, "route", route, "topic", topic,
			"message_id", id, "attempts", it.row.Attempts+btoi(it.out.CountAttempt), "error", it.out.Error)
		if len(examples) < maxAlertExamples {
			examples = append(examples, AlertExample{MessageID: id, Topic: topic, Error: it.out.Error})
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

// bounded is a topic or message id fit for a log line or an alert: a row
// written with plain SQL may hold thousands of characters there (it is
// dead for it), of which the first 255 bytes say enough.
func bounded(s string) string {
	if len(s) <= msgcheck.MaxFieldLen {
		return s
	}
	return strings.ToValidUTF8(s[:msgcheck.MaxFieldLen], "") + "…"
}
