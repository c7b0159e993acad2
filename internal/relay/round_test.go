package relay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// fakeStore serves rounds from memory: Read hands out the rows given to it
// once, Settle records the outcomes. The lease and retention statements
// are never reached by round.
type fakeStore struct {
	Store // nil: any other statement panics

	mu      sync.Mutex
	rows    []store.Row
	reads   int
	settled []store.Outcome
}

func (f *fakeStore) Read(_ context.Context, parts []int, limit int) ([]store.Row, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	rows := f.rows[:min(limit, len(f.rows))]
	f.rows = f.rows[len(rows):]
	return rows, nil
}

func (f *fakeStore) MarkInflight(context.Context, string, []int, []int64) error { return nil }

func (f *fakeStore) Settle(_ context.Context, _ string, outs []store.Outcome) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settled = append(f.settled, outs...)
	return int64(len(outs)), nil
}

func (f *fakeStore) RecordRoute(context.Context, string, string, bool, string) error { return nil }

func (f *fakeStore) outcome(t *testing.T, id int64) (store.Outcome, bool) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.settled {
		if o.ID == id {
			return o, true
		}
	}
	return store.Outcome{}, false
}

// publishFunc is a Publisher calling fn for each envelope in turn.
type publishFunc func(env *publisher.Envelope) error

func (f publishFunc) Publish(_ context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	for i, e := range batch {
		errs[i] = f(e)
	}
	return errs
}

// newTestRelay is a relay over st holding partition 0, with one route for
// "order.*" to pub and the defaults the facade would fill in.
func newTestRelay(t *testing.T, st Store, pub Publisher) *Relay {
	t.Helper()
	return newRouteRelay(t, st, Route{Pattern: "order.*", Publisher: pub})
}

// newRouteRelay is newTestRelay with route rt.
func newRouteRelay(t *testing.T, st Store, rt Route) *Relay {
	t.Helper()
	r, err := New(&store.Backend{}, Config{
		Routes: []Route{rt}, ID: "test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), BatchSize: 100, Workers: 1, MinBatchSize: 100,
		MinPollInterval: time.Millisecond, MaxPollInterval: time.Second, PublishTimeout: 5 * time.Second,
		ShutdownTimeout: time.Second, LeaseTTL: 5 * time.Second, MaxPayloadBytes: 1 << 20, MetricsInterval: time.Minute,
		Store: st,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.own.parts = []int{0}
	r.own.validUntil = time.Now().Add(time.Hour)
	return r
}

func row(id int64, topic, key, headers string) store.Row {
	return store.Row{ID: id, MessageID: "m" + string(rune('0'+id)), Topic: topic, Key: key, HasKey: key != "",
		Payload: `{}`, Headers: headers, MaxAttempts: 10, CreatedAt: time.Now()}
}

// TestRoundOutcomes runs one round over rows that meet each way a message
// can end, without a database.
func TestRoundOutcomes(t *testing.T) {
	st := &fakeStore{rows: []store.Row{
		row(1, "order.created", "k1", ""),       // fails: transient
		row(2, "order.created", "k1", ""),       // same key behind a failure: held back
		row(3, "order.paid", "k2", `{"a":"b"}`), // sent
		row(4, "invoice.sent", "", ""),          // no route
		row(5, "order.created", "", `not json`), // bad headers
		row(6, "order.created", "", ""),         // permanent failure
		row(7, "order.created", "k3", ""),       // publisher panics
	}}
	var mu sync.Mutex
	var published []string
	pub := publishFunc(func(e *publisher.Envelope) error {
		mu.Lock()
		published = append(published, e.ID)
		mu.Unlock()
		switch e.ID {
		case "m1":
			return errors.New("broker hiccup")
		case "m6":
			return publisher.Permanent(errors.New("rejected"))
		case "m7":
			panic("boom")
		case "m3":
			if e.Headers["a"] != "b" || e.Headers[publisher.HeaderTopic] != "order.paid" || e.Headers[publisher.HeaderBusinessKey] != "k2" || e.Headers[publisher.HeaderContentType] != publisher.DefaultContentType {
				return publisher.Permanent(errors.New("headers " + strings.Join([]string{e.Headers["a"], e.Headers[publisher.HeaderTopic]}, ",")))
			}
		}
		return nil
	})
	r := newTestRelay(t, st, pub)
	n, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)})
	if err != nil || n != 7 {
		t.Fatalf("round: %d, %v", n, err)
	}
	for _, c := range []struct {
		id      int64
		status  string
		counted bool
		errHas  string
	}{
		{1, store.StatusPending, true, "broker hiccup"},
		{3, store.StatusSent, true, ""},
		{4, store.StatusDead, true, "no route for topic"},
		{5, store.StatusDead, true, "headers are not a JSON object"},
		{6, store.StatusDead, true, "rejected"},
		{7, store.StatusPending, true, "publisher panicked"},
	} {
		o, ok := st.outcome(t, c.id)
		switch {
		case !ok:
			t.Errorf("message %d: no outcome", c.id)
		case o.Status != c.status || o.CountAttempt != c.counted || !strings.Contains(o.Error, c.errHas):
			t.Errorf("message %d: outcome %+v, want %s counted=%v error with %q", c.id, o, c.status, c.counted, c.errHas)
		}
	}
	if o, ok := st.outcome(t, 7); ok && !o.Unknown {
		t.Errorf("a panicked publish is an unknown outcome: %+v", o)
	}
	if _, ok := st.outcome(t, 2); ok {
		t.Error("message 2 was settled although the message before it on its key failed")
	}
	for _, id := range published {
		if id == "m2" || id == "m4" || id == "m5" {
			t.Errorf("%s was published", id)
		}
	}
}

// TestRoundUnavailablePausesRoute: a destination that cannot be reached
// charges no attempt, takes the route down, and while every route is
// down the next round reads nothing.
func TestRoundUnavailablePausesRoute(t *testing.T) {
	st := &fakeStore{rows: []store.Row{row(1, "order.created", "", ""), row(2, "order.created", "", "")}}
	calls := 0
	r := newTestRelay(t, st, publishFunc(func(*publisher.Envelope) error {
		calls++
		return publisher.Unavailable(errors.New("connection refused"))
	}))
	w := &worker{batchSize: 100, wake: make(chan struct{}, 1)}
	if _, err := r.round(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 2} {
		o, ok := st.outcome(t, id)
		if !ok || o.Status != store.StatusPending || o.CountAttempt || o.Delay <= 0 {
			t.Errorf("message %d: %+v (settled %v), want pending, not counted, delayed", id, o, ok)
		}
	}
	if wait := r.router.routes[0].health.paused(time.Now()); wait <= 0 {
		t.Fatal("the route is not paused")
	}
	st.rows = []store.Row{row(3, "order.created", "", "")}
	reads := st.reads
	if n, err := r.round(t.Context(), w); n != 0 || err != nil || st.reads != reads {
		t.Fatalf("round while paused: n=%d err=%v reads %d → %d", n, err, reads, st.reads)
	}
	if calls != 2 {
		t.Fatalf("publisher called %d times, want 2", calls)
	}
}

// TestContentTypeOfPlainSQLRows: a row that names no content type (as
// plain SQL writes them) is published as JSON when its payload is JSON and
// as text otherwise; a content type the row names is kept as it is.
func TestContentTypeOfPlainSQLRows(t *testing.T) {
	rows := []store.Row{
		row(1, "order.created", "", ""),
		row(2, "order.created", "", ""),
		row(3, "order.created", "", `{"content-type":"application/xml"}`),
		row(4, "order.created", "", `{"content-type":"application/json"}`),
	}
	rows[1].Payload = "order 42 shipped"
	rows[2].Payload = "<order id='42'/>"
	rows[3].Payload = "not json either" // named JSON: trusted, delivered as named
	want := map[string]string{"m1": publisher.DefaultContentType, "m2": TextContentType, "m3": "application/xml", "m4": publisher.DefaultContentType}
	var mu sync.Mutex
	got := map[string]string{}
	pub := publishFunc(func(e *publisher.Envelope) error {
		mu.Lock()
		got[e.ID] = e.Headers[publisher.HeaderContentType]
		mu.Unlock()
		return nil
	})
	r := newTestRelay(t, &fakeStore{rows: rows}, pub)
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	for id, ct := range want {
		if got[id] != ct {
			t.Errorf("%s published with content-type %q, want %q", id, got[id], ct)
		}
	}
}

type checkFunc func(context.Context, *publisher.Envelope) (bool, error)

func (f checkFunc) Delivered(ctx context.Context, env *publisher.Envelope) (bool, error) {
	return f(ctx, env)
}

// TestRoundCheckerCannotSay: when the Checker of an uncertain message
// fails, the message is neither sent again nor charged: it waits to be
// asked about again, still uncertain. A "yes" marks it sent, a "no" sends
// it.
func TestRoundCheckerCannotSay(t *testing.T) {
	rows := []store.Row{row(1, "order.created", "", ""), row(2, "order.created", "", ""), row(3, "order.created", "", "")}
	for i := range rows {
		rows[i].UnknownOutcome, rows[i].Attempts = true, 2
	}
	st := &fakeStore{rows: rows}
	var mu sync.Mutex
	var published []string
	pub := publishFunc(func(e *publisher.Envelope) error {
		mu.Lock()
		published = append(published, e.ID)
		mu.Unlock()
		return nil
	})
	r := newTestRelay(t, st, pub)
	r.router.routes[0].Checker = checkFunc(func(_ context.Context, e *publisher.Envelope) (bool, error) {
		switch e.ID {
		case "m1":
			return false, errors.New("check endpoint answered 503")
		case "m2":
			return true, nil
		}
		return false, nil
	})
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	if len(published) != 1 || published[0] != "m3" {
		t.Fatalf("published %v, want only m3 (the one the checker said was not delivered)", published)
	}
	o1, _ := st.outcome(t, 1)
	if o1.Status != store.StatusPending || o1.CountAttempt || !o1.Unknown || o1.Delay <= 0 || !strings.Contains(o1.Error, "503") {
		t.Errorf("message the checker could not answer for: %+v; want pending, uncharged, still unknown, later, with the reason", o1)
	}
	if o2, _ := st.outcome(t, 2); o2.Status != store.StatusSent {
		t.Errorf("message the checker confirmed: %+v, want sent", o2)
	}
	// Only the failing check is left: each failure in a row waits twice
	// as long as the one before, whatever the attempts.
	var waits []time.Duration
	for range 2 {
		st.rows, st.settled = rows[:1], nil
		if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
			t.Fatal(err)
		}
		o, _ := st.outcome(t, 1)
		if o.CountAttempt {
			t.Errorf("a failed check charged an attempt: %+v", o)
		}
		waits = append(waits, o.Delay)
	}
	if waits[0] < time.Second || waits[1] != 2*waits[0] {
		t.Errorf("waits after failed checks in a row: %v, want each twice the one before, from at least 1s", waits)
	}
}

// TestRoundUncertaintyIsKept: a message whose earlier attempt may have
// arrived stays uncertain when its next attempt fails for a definite
// reason, so the Checker is asked before it is sent again; once the
// Checker has said it did not arrive, a definite failure clears it.
func TestRoundUncertaintyIsKept(t *testing.T) {
	rows := []store.Row{row(1, "order.created", "", ""), row(2, "order.created", "", "")}
	for i := range rows {
		rows[i].UnknownOutcome, rows[i].Attempts = true, 1
	}
	st := &fakeStore{rows: rows}
	pub := publishFunc(func(e *publisher.Envelope) error { return errors.New("HTTP 503") })
	r := newTestRelay(t, st, pub)
	r.router.routes[0].Checker = checkFunc(func(_ context.Context, e *publisher.Envelope) (bool, error) {
		if e.ID == "m2" {
			return false, nil
		}
		return false, errors.New("check endpoint down")
	})
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	if o, _ := st.outcome(t, 1); !o.Unknown {
		t.Errorf("m1 (its check failed): %+v, want still uncertain", o)
	}
	if o, _ := st.outcome(t, 2); o.Unknown || !o.CountAttempt {
		t.Errorf("m2 (checked: not delivered; then a definite failure): %+v, want certain and charged", o)
	}
	r.router.routes[0].Checker = nil
	st.rows = []store.Row{rows[0]}
	st.settled = nil
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	if o, _ := st.outcome(t, 1); !o.Unknown {
		t.Errorf("an uncertain message that failed again with a definite error: %+v, want still uncertain", o)
	}
}
