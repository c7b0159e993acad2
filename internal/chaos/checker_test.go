package chaos

import (
	"strings"
	"sync"
	"testing"
)

// clean is a history with nothing wrong: two keys and a keyless message,
// all delivered once in order, all marked sent, one rollback that never
// showed up.
func clean() History {
	return History{
		Committed: []Committed{
			{"a1", "a", 1}, {"b1", "b", 1}, {"a2", "a", 2}, {"n1", "", 1}, {"b2", "b", 2},
		},
		RolledBack: []string{"r1"},
		Delivered:  []Delivery{{"b1", "b"}, {"a1", "a"}, {"n1", ""}, {"a2", "a"}, {"b2", "b"}},
		Status:     map[string]string{"a1": "sent", "a2": "sent", "b1": "sent", "b2": "consumed", "n1": "sent"},
	}
}

func TestCheckCleanHistory(t *testing.T) {
	rep := Check(clean())
	if err := rep.Err(Bounds{}); err != nil {
		t.Fatal(err)
	}
	if rep.Committed != 5 || rep.Delivered != 5 || rep.Distinct != 5 {
		t.Fatalf("counts: %s", rep)
	}
}

// TestCheckFindsEachAnomaly breaks a clean history one way at a time and
// expects exactly that anomaly counted, and Err naming it.
func TestCheckFindsEachAnomaly(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(h *History)
		count  func(r Report) int
		want   int
		err    string
	}{
		{"lost", func(h *History) {
			h.Delivered = h.Delivered[:4] // b2 never arrives, yet the table says consumed
			h.Status["b2"] = "pending"
		}, func(r Report) int { return r.Lost }, 1, "lost 1 > 0"},
		{"unexpected rolled back", func(h *History) {
			h.Delivered = append(h.Delivered, Delivery{"r1", ""})
		}, func(r Report) int { return r.Unexpected }, 1, "unexpected 1 > 0"},
		{"unexpected never written", func(h *History) {
			h.Delivered = append(h.Delivered, Delivery{"zz", "a"}, Delivery{"zy", "a"})
		}, func(r Report) int { return r.Unexpected }, 2, "unexpected 2 > 0"},
		{"duplicates", func(h *History) {
			h.Delivered = append(h.Delivered, Delivery{"a1", "a"}, Delivery{"a1", "a"}, Delivery{"n1", ""})
		}, func(r Report) int { return r.Duplicates }, 3, "duplicates 3 > 0"},
		{"falsely sent", func(h *History) {
			h.Delivered = h.Delivered[1:] // b1 never arrives but its row says sent
		}, func(r Report) int { return r.FalselySent }, 1, "falsely-sent 1 > 0"},
		{"falsely sent uncommitted row", func(h *History) {
			h.Status["x9"] = "sent"
		}, func(r Report) int { return r.FalselySent }, 1, "falsely-sent 1 > 0"},
		{"inversion", func(h *History) {
			h.Delivered = []Delivery{{"a2", "a"}, {"b1", "b"}, {"a1", "a"}, {"n1", ""}, {"b2", "b"}}
		}, func(r Report) int { return r.Inversions }, 1, "inversions 1 > 0"},
		{"key mismatch", func(h *History) {
			h.Delivered[0].Key = "c"
		}, func(r Report) int { return r.KeyMismatch }, 1, "key-mismatch 1 > 0"},
		{"phantom", func(h *History) {
			h.Status["r1"] = "pending"
		}, func(r Report) int { return r.Phantoms }, 1, "phantoms 1 > 0"},
		{"dead", func(h *History) {
			h.Delivered = h.Delivered[:4]
			h.Status["b2"] = "dead"
		}, func(r Report) int { return r.Dead }, 1, "dead 1 > 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := clean()
			c.mutate(&h)
			rep := Check(h)
			if got := c.count(rep); got != c.want {
				t.Fatalf("counted %d, want %d: %s", got, c.want, rep)
			}
			err := rep.Err(Bounds{})
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("Err = %v, want it to say %q", err, c.err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("Err is not one line: %q", err)
			}
		})
	}
}

func TestCheckDuplicateAfterLaterMessageIsNoInversion(t *testing.T) {
	h := clean()
	// a1 arrives again after a2: a redelivery, which consumers dedupe, not
	// an order violation.
	h.Delivered = append(h.Delivered, Delivery{"a1", "a"})
	rep := Check(h)
	if rep.Inversions != 0 || rep.Duplicates != 1 {
		t.Fatalf("%s", rep)
	}
	if err := rep.Err(Bounds{MaxDuplicates: 1}); err != nil {
		t.Fatalf("within bounds, got %v", err)
	}
	if err := rep.Err(Bounds{MaxDuplicates: Unbounded}); err != nil {
		t.Fatalf("unbounded, got %v", err)
	}
}

func TestCheckUncertainCommits(t *testing.T) {
	h := clean()
	h.Uncertain = []string{"u1", "u2", "r1"}
	// u1's commit happened and it arrived; u2's did not; r1 is known to
	// have rolled back, so its arrival stays unexpected.
	h.Delivered = append(h.Delivered, Delivery{"u1", "a"}, Delivery{"r1", ""})
	h.Status["u1"] = "sent"
	rep := Check(h)
	if rep.Indeterminate != 1 || rep.Unexpected != 1 || rep.Lost != 0 || rep.FalselySent != 0 {
		t.Fatalf("%s", rep)
	}
	// An uncertain message marked sent that never arrived is still falsely
	// sent.
	h.Status["u2"] = "sent"
	if rep := Check(h); rep.FalselySent != 1 {
		t.Fatalf("%s", rep)
	}
}

func TestCheckDeadIsNotLost(t *testing.T) {
	h := clean()
	h.Delivered = h.Delivered[:4]
	h.Status["b2"] = "dead"
	rep := Check(h)
	if rep.Lost != 0 || rep.Dead != 1 {
		t.Fatalf("%s", rep)
	}
	if err := rep.Err(Bounds{MaxDead: 1}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.String(), "dead:b2") {
		t.Fatalf("example missing: %s", rep)
	}
}

func TestRecorderBuildsHistory(t *testing.T) {
	var r Recorder
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := string(rune('a' + w))
			for i := range 50 {
				id := key + string(rune('0'+i/10)) + string(rune('0'+i%10))
				r.Commit([]string{id}, []string{key})
				r.Deliver(id, key)
			}
			r.RollBack([]string{key + "-rb"})
		}()
	}
	wg.Wait()
	status := map[string]string{}
	h := r.History(status)
	for _, c := range h.Committed {
		status[c.ID] = StatusSent
	}
	rep := Check(h)
	if err := rep.Err(Bounds{}); err != nil {
		t.Fatal(err)
	}
	if c, d, a := r.Counts(); c != 200 || d != 200 || a != 200 || len(h.RolledBack) != 4 {
		t.Fatalf("counts %d %d %d, rolled back %d", c, d, a, len(h.RolledBack))
	}
	// Sequences are per key and start at 1.
	for _, c := range h.Committed {
		if c.Seq < 1 || c.Seq > 50 {
			t.Fatalf("seq %d for %s", c.Seq, c.ID)
		}
	}
}
