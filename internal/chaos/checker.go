// Package chaos judges fault-injection runs of the relay the way Jepsen
// judges a database: a run is recorded as a History — what producers
// committed, what they rolled back, what the destination received in
// order, and what the outbox table says at the end — and Check turns it
// into a Report of every anomaly the outbox promises not to produce
// (lost messages, messages nobody committed, rows marked sent that never
// arrived, per-key order broken) and of the one it allows within bounds
// (duplicates). Report.Err compares the counts with a scenario's Bounds.
package chaos

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Committed is a message a producer committed: its message id, its
// business key ("" for none) and its place in that key's sequence as
// the producer committed it (1, 2, …).
type Committed struct {
	ID  string
	Key string
	Seq int
}

// Delivery is one arrival at the destination, in arrival order.
type Delivery struct {
	ID  string
	Key string
}

// Row statuses, as in the outbox table.
const (
	StatusPending  = "pending"
	StatusSent     = "sent"
	StatusConsumed = "consumed"
	StatusDead     = "dead"
)

// History is everything recorded about one run.
type History struct {
	// Committed are the messages whose transactions committed.
	Committed []Committed
	// RolledBack are the ids of messages enqueued in transactions that
	// rolled back: they must never arrive.
	RolledBack []string
	// Uncertain are the ids of messages whose commit failed in a way that
	// leaves its outcome unknown (the connection died during COMMIT):
	// they may arrive or not, but if the table has them as sent they must
	// have arrived.
	Uncertain []string
	// Delivered is every arrival at the destination, in order, copies
	// included.
	Delivered []Delivery
	// Status is the outbox table at the end of the run: message id →
	// status. Ids absent from it have no row.
	Status map[string]string
}

// Report counts what Check found. Example ids of each anomaly are kept
// (a few of each) to start the investigation from.
type Report struct {
	Committed int // messages committed
	Delivered int // arrivals, copies included
	Distinct  int // distinct message ids that arrived

	// Lost: committed, never delivered, and not dead in the table.
	Lost int
	// Unexpected: arrivals of messages that were rolled back or never
	// committed at all (uncertain commits excepted).
	Unexpected int
	// Indeterminate: distinct uncertain messages that arrived (their
	// commit did happen).
	Indeterminate int
	// Duplicates: arrivals beyond the first of each message.
	Duplicates int
	// FalselySent: rows marked sent (or consumed) whose message never
	// arrived.
	FalselySent int
	// Inversions: first arrivals of a key that came after a later message
	// of the same key (by the producer's sequence).
	Inversions int
	// KeyMismatch: arrivals whose key differs from the committed one.
	KeyMismatch int
	// Phantoms: rolled-back messages that have a row in the table.
	Phantoms int
	// Dead: committed messages the table holds as dead.
	Dead int
	// Pending: committed messages still pending in the table.
	Pending int

	// Examples holds up to three message ids per anomaly name ("lost",
	// "unexpected", "duplicate", "falsely-sent", "inversion",
	// "key-mismatch", "phantom", "dead", "pending").
	Examples map[string][]string
}

// Check examines h. It is pure: the same history gives the same report.
func Check(h History) Report {
	rep := Report{Committed: len(h.Committed), Delivered: len(h.Delivered), Examples: map[string][]string{}}
	committed := make(map[string]Committed, len(h.Committed))
	for _, c := range h.Committed {
		committed[c.ID] = c
	}
	rolledBack := make(map[string]bool, len(h.RolledBack))
	for _, id := range h.RolledBack {
		rolledBack[id] = true
	}
	uncertain := make(map[string]bool, len(h.Uncertain))
	for _, id := range h.Uncertain {
		uncertain[id] = true
	}

	arrivals := make(map[string]int, len(h.Delivered))
	lastSeq := map[string]int{} // key → highest seq first-delivered so far
	for _, d := range h.Delivered {
		arrivals[d.ID]++
		if arrivals[d.ID] > 1 {
			rep.Duplicates++
			rep.example("duplicate", d.ID)
			continue
		}
		c, ok := committed[d.ID]
		if !ok && uncertain[d.ID] && !rolledBack[d.ID] {
			rep.Indeterminate++
			continue
		}
		if !ok {
			rep.Unexpected++
			rep.example("unexpected", d.ID)
			continue
		}
		if d.Key != c.Key {
			rep.KeyMismatch++
			rep.example("key-mismatch", d.ID)
		}
		if c.Key == "" {
			continue
		}
		if prev, seen := lastSeq[c.Key]; seen && c.Seq < prev {
			rep.Inversions++
			rep.example("inversion", d.ID)
			continue
		}
		lastSeq[c.Key] = c.Seq
	}
	rep.Distinct = len(arrivals)

	for _, c := range h.Committed {
		st := h.Status[c.ID]
		switch st {
		case StatusDead:
			rep.Dead++
			rep.example("dead", c.ID)
		case StatusPending:
			rep.Pending++
			rep.example("pending", c.ID)
		}
		if arrivals[c.ID] == 0 && st != StatusDead {
			rep.Lost++
			rep.example("lost", c.ID)
		}
	}
	// Every row claiming delivery, committed or not, must have arrived.
	ids := make([]string, 0, len(h.Status))
	for id := range h.Status {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		st := h.Status[id]
		if (st == StatusSent || st == StatusConsumed) && arrivals[id] == 0 {
			rep.FalselySent++
			rep.example("falsely-sent", id)
		}
		if rolledBack[id] {
			rep.Phantoms++
			rep.example("phantom", id)
		}
	}
	return rep
}

func (r *Report) example(kind, id string) {
	if len(r.Examples[kind]) < 3 {
		r.Examples[kind] = append(r.Examples[kind], id)
	}
}

// String is the report on one line, counts first, then examples of any
// anomaly found.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "committed=%d delivered=%d distinct=%d lost=%d unexpected=%d duplicates=%d falsely-sent=%d inversions=%d key-mismatch=%d phantoms=%d dead=%d pending=%d indeterminate=%d",
		r.Committed, r.Delivered, r.Distinct, r.Lost, r.Unexpected, r.Duplicates, r.FalselySent, r.Inversions, r.KeyMismatch, r.Phantoms, r.Dead, r.Pending, r.Indeterminate)
	kinds := make([]string, 0, len(r.Examples))
	for k := range r.Examples {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s:%s", k, strings.Join(r.Examples[k], ","))
	}
	return b.String()
}

// Unbounded, as a bound, allows any count.
const Unbounded = -1

// Bounds are the most of each anomaly a scenario tolerates. The zero
// value tolerates nothing: not one lost, unexpected, duplicate, falsely
// sent, inverted, mismatched, phantom, dead or pending message.
type Bounds struct {
	MaxLost, MaxUnexpected, MaxDuplicates, MaxFalselySent, MaxInversions int
	MaxKeyMismatch, MaxPhantoms, MaxDead, MaxPending                     int
}

// Err is nil when r is within b; otherwise it names every bound
// exceeded, on one line.
func (r Report) Err(b Bounds) error {
	var bad []string
	check := func(name string, got, limit int) {
		if limit != Unbounded && got > limit {
			bad = append(bad, fmt.Sprintf("%s %d > %d", name, got, limit))
		}
	}
	check("lost", r.Lost, b.MaxLost)
	check("unexpected", r.Unexpected, b.MaxUnexpected)
	check("duplicates", r.Duplicates, b.MaxDuplicates)
	check("falsely-sent", r.FalselySent, b.MaxFalselySent)
	check("inversions", r.Inversions, b.MaxInversions)
	check("key-mismatch", r.KeyMismatch, b.MaxKeyMismatch)
	check("phantoms", r.Phantoms, b.MaxPhantoms)
	check("dead", r.Dead, b.MaxDead)
	check("pending", r.Pending, b.MaxPending)
	if len(bad) == 0 {
		return nil
	}
	return errors.New("chaos: bounds exceeded: " + strings.Join(bad, ", ") + " (" + r.String() + ")")
}
