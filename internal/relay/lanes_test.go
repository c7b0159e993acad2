package relay

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// keyedRow is row with an id-based message id for any id.
func keyedRow(id int64, key string) store.Row {
	r := row(id, "order.created", key, "")
	r.MessageID = fmt.Sprintf("m%d", id)
	return r
}

// TestLanesKeepEachKeyInOneLaneInOrder: each key's messages are in one
// lane, one per wave, in id order; keyless messages are all in first
// waves; a batch with no repeated key is one lane of one wave.
func TestLanesKeepEachKeyInOneLaneInOrder(t *testing.T) {
	var items []*item
	for i := range 300 {
		key := fmt.Sprintf("k%d", i%7)
		if i%10 == 0 {
			key = ""
		}
		rw := keyedRow(int64(i+1), key)
		items = append(items, &item{row: &rw})
	}
	ls := lanes(items)
	if len(ls) != 7 {
		t.Fatalf("%d lanes for 7 keys, want 7", len(ls))
	}
	laneOf := map[string]int{}
	last := map[string]int64{}
	count := 0
	for l, waves := range ls {
		for w, wave := range waves {
			inWave := map[string]bool{}
			for _, it := range wave {
				count++
				if !it.row.HasKey {
					if w != 0 {
						t.Errorf("keyless message %d in wave %d", it.row.ID, w)
					}
					continue
				}
				k := it.row.Key
				if got, ok := laneOf[k]; ok && got != l {
					t.Fatalf("key %s in lanes %d and %d", k, got, l)
				}
				laneOf[k] = l
				if inWave[k] {
					t.Fatalf("key %s twice in one wave", k)
				}
				inWave[k] = true
				if it.row.ID <= last[k] {
					t.Fatalf("key %s: message %d after %d", k, it.row.ID, last[k])
				}
				last[k] = it.row.ID
			}
		}
	}
	if count != len(items) {
		t.Fatalf("lanes hold %d of %d items", count, len(items))
	}

	// More keys than maxLanes: the batch's waves go together, in one
	// lane, still one message per key per wave and in id order.
	var many []*item
	for i := range 4 * (maxLanes + 1) {
		rw := keyedRow(int64(i+1), fmt.Sprintf("k%d", i%(maxLanes+1)))
		many = append(many, &item{row: &rw})
	}
	if ls := lanes(many); len(ls) != 1 || len(ls[0]) != 4 {
		t.Fatalf("%d keys over 4 waves: %d lanes, want 1 lane of 4 waves", maxLanes+1, len(ls))
	} else {
		for w, wave := range ls[0] {
			if len(wave) != maxLanes+1 {
				t.Fatalf("wave %d holds %d messages, want one per key (%d)", w, len(wave), maxLanes+1)
			}
			for _, it := range wave {
				if want := int64(w*(maxLanes+1)) + 1; it.row.ID < want || it.row.ID >= want+int64(maxLanes+1) {
					t.Fatalf("wave %d holds message %d", w, it.row.ID)
				}
			}
		}
	}

	var flat []*item
	for i := range 50 {
		rw := keyedRow(int64(i+1), fmt.Sprintf("k%d", i))
		flat = append(flat, &item{row: &rw})
	}
	if ls := lanes(flat); len(ls) != 1 || len(ls[0]) != 1 || len(ls[0][0]) != 50 {
		t.Fatalf("a batch with no repeated key: %d lanes", len(ls))
	}
}

// TestRoundFailureMidRunHoldsTheKey: in a batch of several waves, a
// message that fails in the middle of its key's run keeps every later
// message of that key unpublished and unsettled, while the other keys'
// runs go on to the end.
func TestRoundFailureMidRunHoldsTheKey(t *testing.T) {
	var rows []store.Row
	for i := range 60 {
		rows = append(rows, keyedRow(int64(i+1), fmt.Sprintf("k%d", i%3)))
	}
	// k1's messages are 2, 5, 8, …; its fourth (11) fails.
	st := &fakeStore{rows: rows}
	var mu sync.Mutex
	published := map[string][]int64{}
	pub := publishFunc(func(e *publisher.Envelope) error {
		var id int64
		fmt.Sscanf(e.ID, "m%d", &id)
		mu.Lock()
		published[e.Key] = append(published[e.Key], id)
		mu.Unlock()
		if id == 11 {
			return fmt.Errorf("broker hiccup")
		}
		return nil
	})
	r := newTestRelay(t, st, pub)
	if n, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil || n != 60 {
		t.Fatalf("round: %d, %v", n, err)
	}
	if got := published["k1"]; !slices.Equal(got, []int64{2, 5, 8, 11}) {
		t.Fatalf("k1 published %v, want 2 5 8 11 and nothing after the failure", got)
	}
	for _, k := range []string{"k0", "k2"} {
		got := published[k]
		if len(got) != 20 || !slices.IsSorted(got) {
			t.Fatalf("%s published %v, want its 20 messages in order", k, got)
		}
	}
	if o, ok := st.outcome(t, 11); !ok || o.Status != store.StatusPending || !o.CountAttempt {
		t.Fatalf("message 11: %+v (settled %v), want a counted retry", o, ok)
	}
	for id := int64(14); id <= 59; id += 3 {
		if o, ok := st.outcome(t, id); ok {
			t.Fatalf("message %d behind the failed one was settled: %+v", id, o)
		}
	}
	for _, id := range []int64{2, 5, 8, 1, 60} {
		if o, ok := st.outcome(t, id); !ok || o.Status != store.StatusSent {
			t.Fatalf("message %d: %+v (settled %v), want sent", id, o, ok)
		}
	}
}
