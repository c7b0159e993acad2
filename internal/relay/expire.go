package relay

import (
	"context"
	"time"
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

// startExpiring runs the expiry loop for as long as ctx lasts, when the
// store has one.
func (r *Relay) startExpiring(ctx context.Context) {
	ex, ok := r.store.(expirer)
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
