package relay

import (
	"context"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// Expiry (schema version 19). A message whose expires_at has come before
// it was confirmed is never read again: the reads leave it out, and a
// key's earlier message that expired no longer holds the key back. This
// loop moves such messages of the partitions the relay holds to the
// status expired, with the reason in last_error and available_at set to
// the moment (retention keeps them as long as dead rows, counted from
// then), so that they count as expired, release their key for good and
// can be requeued. A message
// being published when it expires is not recalled: its outcome is
// recorded over expired (sent or dead; a retry is not), since that is
// what happened.

// expireInterval is how often the relay looks for messages that expired.
const expireInterval = time.Second

// expirer is a store that expires messages (the outbox's own table;
// adopted tables have no expiry).
type expirer interface {
	Expire(ctx context.Context, owner string) (int64, error)
}

// tableExpirer expires the table domain of a database read by snapshots.
type tableExpirer struct{ st snapshotStore }

func (t tableExpirer) Expire(ctx context.Context, owner string) (int64, error) {
	return t.st.ExpireTable(ctx, owner)
}

// startExpiring runs the expiry loop for as long as ctx lasts, when the
// store has one.
func (r *Relay) startExpiring(ctx context.Context) {
	ex, ok := r.store.(expirer)
	if r.snap != nil {
		ex, ok = tableExpirer{r.snap.st}, true
	}
	if !ok {
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		t := time.NewTicker(expireInterval)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n, err := ex.Expire(ctx, r.id)
			switch {
			case err != nil && ctx.Err() == nil:
				if !failing {
					r.log.Warn("outbox relay: expiring messages failed; trying again", "relay", r.id, "err", err)
				}
				failing = true
			case err == nil:
				failing = false
				if n > 0 {
					r.log.Info("outbox relay: messages expired", "relay", r.id, "expired", n)
					if r.metrics != nil {
						r.metrics.expired.Add(float64(n))
					}
				}
			}
		}
	}()
}

// ager is a store that can expire the messages older than a route's max
// age (the outbox's own table; adopted tables have no expiry).
type ager interface {
	ExpireOld(ctx context.Context, owner string, ids []int64, reason string) (int64, error)
}

// maxAgeOf is rs's max age, else the relay's (0: none).
func (r *Relay) maxAgeOf(rs *routeState) time.Duration {
	if rs.MaxAge > 0 {
		return rs.MaxAge
	}
	return r.cfg.MaxAge
}

// tooOld decides a message older than its route's max age (by its
// created_at and the database's clock): it is not published. On a store
// with expiry it is put back uncharged, holding its key for the round,
// and expireOld moves it to expired before the round settles (so the put
// back is not recorded); elsewhere (an adopted table) it is dead.
func (r *Relay) tooOld(it *item) bool {
	maxAge := r.maxAgeOf(it.route)
	created := r.plausibleCreatedAt(it.row.CreatedAt)
	if maxAge <= 0 || created.IsZero() {
		return false
	}
	age := r.clock.at(time.Now()).Sub(created)
	if age <= maxAge {
		return false
	}
	reason := "expired: older than the max_age " + maxAge.String() + " of route " + it.route.name + " (" + age.Round(time.Second).String() + ") before it was delivered"
	it.decided = true
	if _, ok := r.store.(ager); !ok {
		it.out = store.Outcome{ID: it.row.ID, Status: store.StatusDead, Error: reason}
		return true
	}
	it.tooOld = true
	it.out = store.Outcome{ID: it.row.ID, Status: store.StatusPending, Delay: 2 * expireInterval, Error: reason, Unknown: it.uncertain()}
	return true
}

// expireOld moves the round's messages older than their route's max age
// to expired. Should it fail, they stay put back, uncharged, and the next
// round tries again.
func (r *Relay) expireOld(ctx context.Context, items []*item) {
	byReason := map[string][]*item{}
	for _, it := range items {
		if it.tooOld {
			byReason[it.out.Error] = append(byReason[it.out.Error], it)
		}
	}
	a, _ := r.store.(ager)
	for reason, its := range byReason {
		ids := make([]int64, len(its))
		for i, it := range its {
			ids[i] = it.row.ID
		}
		n, err := a.ExpireOld(ctx, r.id, ids, reason)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("outbox relay: expiring messages older than their route's max_age failed; trying again", "relay", r.id, "err", err)
			}
			continue
		}
		for _, it := range its {
			it.expired = true
		}
		if n > 0 {
			r.log.Info("outbox relay: messages expired", "relay", r.id, "expired", n, "reason", reason)
			if r.metrics != nil {
				r.metrics.expired.Add(float64(n))
			}
		}
	}
}
