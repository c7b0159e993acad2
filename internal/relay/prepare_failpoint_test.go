//go:build outbox_failpoints

package relay

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// setFailpoints installs spec for the test.
func setFailpoints(t *testing.T, spec string) {
	t.Helper()
	if err := failpoint.Set(spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = failpoint.Set("") })
}

// TestPreparePanicIsTheRowsDeadLetter: a panic while one row is prepared
// makes that row dead with the panic as its reason; the round goes on and
// its other rows are sent.
func TestPreparePanicIsTheRowsDeadLetter(t *testing.T) {
	setFailpoints(t, "prepare=panic:m2")
	st := &fakeStore{rows: []store.Row{row(1, "order.created", "k", ""), row(2, "order.created", "k", ""), row(3, "order.created", "k", "")}}
	r := newTestRelay(t, st, publishFunc(func(*publisher.Envelope) error { return nil }))
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]string{1: store.StatusSent, 2: store.StatusDead, 3: store.StatusSent} {
		o, ok := st.outcome(t, id)
		if !ok || o.Status != want {
			t.Errorf("message %d: %+v, %v; want %s", id, o, ok, want)
		}
	}
	if o, _ := st.outcome(t, 2); o.Error != "preparing the message panicked: failpoint prepare (message m2): panic" || !o.CountAttempt {
		t.Errorf("message 2: %+v", o)
	}
}

// TestSuspectChargedBeforePrepare: a suspect of a crashed round published
// alone has its attempt recorded before it is prepared, so that a row
// that kills the process while it is decoded runs out of attempts as one
// whose publish does.
func TestSuspectChargedBeforePrepare(t *testing.T) {
	setFailpoints(t, "prepare=panic:m1")
	st := &fakeStore{rows: []store.Row{row(1, "order.created", "k", "")}}
	r := newTestRelay(t, st, publishFunc(func(*publisher.Envelope) error { return nil }))
	r.own.suspect = map[int]int64{0: 1}
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.settled) != 2 {
		t.Fatalf("settled %+v, want the charge, then the outcome", st.settled)
	}
	charge, out := st.settled[0], st.settled[1]
	if charge.Status != store.StatusPending || !charge.CountAttempt || !charge.Unknown || charge.Error != errRelayStopped {
		t.Errorf("charge %+v", charge)
	}
	if out.Status != store.StatusDead || out.CountAttempt || !strings.Contains(out.Error, "preparing the message panicked") {
		t.Errorf("outcome %+v: dead, its attempt already counted", out)
	}
}
