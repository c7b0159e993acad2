package admin

import (
	"sync"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// history is a ring of the last hour of samples.
type history struct {
	interval  time.Duration
	delivered func() int64

	mu       sync.Mutex
	ring     []sampleJSON
	next     int  // where the next sample goes
	full     bool // the ring has wrapped
	last     time.Time
	lastSent int64
}

type sampleJSON struct {
	At                      time.Time `json:"at"`
	Pending                 int64     `json:"pending"`
	Dead                    int64     `json:"dead"`
	OldestPendingAgeSeconds float64   `json:"oldest_pending_age_seconds"`
	OldestDueAgeSeconds     float64   `json:"oldest_due_age_seconds"`
	DeliveredPerSecond      *float64  `json:"delivered_per_second"`
}

type historyJSON struct {
	IntervalSeconds float64      `json:"interval_seconds"`
	Samples         []sampleJSON `json:"samples"`
}

func newHistory(interval time.Duration, delivered func() int64) *history {
	n := int(min(int64(HistoryWindow/interval), MaxHistorySamples))
	return &history{interval: interval, delivered: delivered, ring: make([]sampleJSON, max(n, 1))}
}

// add records a sample taken at now.
func (h *history) add(now time.Time, g store.GaugeSample) {
	s := sampleJSON{
		At: now.UTC().Truncate(time.Millisecond), Pending: g.Pending, Dead: g.Dead,
		OldestPendingAgeSeconds: g.OldestPendingAge.Seconds(),
		OldestDueAgeSeconds:     g.OldestDueAge.Seconds(),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.delivered != nil {
		sent := h.delivered()
		if !h.last.IsZero() {
			if secs := now.Sub(h.last).Seconds(); secs > 0 && sent >= h.lastSent {
				rate := float64(sent-h.lastSent) / secs
				s.DeliveredPerSecond = &rate
			}
		}
		h.last, h.lastSent = now, sent
	}
	h.ring[h.next] = s
	h.next = (h.next + 1) % len(h.ring)
	if h.next == 0 {
		h.full = true
	}
}

// snapshot returns the samples, oldest first.
func (h *history) snapshot() historyJSON {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := historyJSON{IntervalSeconds: h.interval.Seconds(), Samples: make([]sampleJSON, 0, len(h.ring))}
	if h.full {
		out.Samples = append(out.Samples, h.ring[h.next:]...)
	}
	out.Samples = append(out.Samples, h.ring[:h.next]...)
	return out
}
