package outboxwebhook

import "time"

// SetClock replaces the clock that stamps webhook-timestamp.
func SetClock(p *Publisher, now func() time.Time) { p.now = now }
