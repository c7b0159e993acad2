package chaos

import "sync"

// Recorder builds a History while a run goes on: producers report what
// they committed and rolled back, the destination what arrived. It is
// safe for concurrent use; the zero value is ready.
type Recorder struct {
	mu         sync.Mutex
	committed  []Committed
	seq        map[string]int
	rolledBack []string
	uncertain  []string
	delivered  []Delivery
	distinct   map[string]bool
}

// Commit records ids, committed in this order in one transaction, with
// keys[i] the key of ids[i]. Each key's sequence continues from the last
// commit of that key, so a key's messages must be committed by one
// producer at a time for the order check to mean anything.
func (r *Recorder) Commit(ids, keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seq == nil {
		r.seq = map[string]int{}
	}
	for i, id := range ids {
		k := keys[i]
		r.seq[k]++
		r.committed = append(r.committed, Committed{ID: id, Key: k, Seq: r.seq[k]})
	}
}

// RollBack records ids enqueued in a transaction that rolled back.
func (r *Recorder) RollBack(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolledBack = append(r.rolledBack, ids...)
}

// Uncertain records ids whose commit may or may not have happened.
func (r *Recorder) Uncertain(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uncertain = append(r.uncertain, ids...)
}

// Deliver records an arrival at the destination.
func (r *Recorder) Deliver(id, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.distinct == nil {
		r.distinct = map[string]bool{}
	}
	r.delivered = append(r.delivered, Delivery{ID: id, Key: key})
	r.distinct[id] = true
}

// Counts are how many messages were committed, how many distinct ones
// arrived and how many arrivals there were.
func (r *Recorder) Counts() (committed, distinct, arrivals int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.committed), len(r.distinct), len(r.delivered)
}

// History is a copy of what was recorded, with status as the table.
func (r *Recorder) History(status map[string]string) History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return History{
		Committed:  append([]Committed(nil), r.committed...),
		RolledBack: append([]string(nil), r.rolledBack...),
		Uncertain:  append([]string(nil), r.uncertain...),
		Delivered:  append([]Delivery(nil), r.delivered...),
		Status:     status,
	}
}
