// Package drivertest is the conformance suite for outbox drivers
// (package driver). A driver's own tests call Run with a factory of fresh
// databases; passing it means the producer, the relay, migrations and the
// error translation the outbox relies on all work through the driver:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, func(t *testing.T) driver.Driver[*sql.Tx] {
//			return newDriverOverAFreshDatabase(t)
//		})
//	}
//
// The suite needs a real database: it writes to outbox_messages, lets a
// relay deliver and settle, provokes unique violations and, on PostgreSQL
// and MySQL, a deadlock.
package drivertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
)

// Factory returns a driver over a database of its own for one test, empty
// or already migrated (the suite runs outbox.Migrate on it). It cleans up
// with t.Cleanup; the suite never closes the driver's pool.
type Factory[TTx any] func(t *testing.T) driver.Driver[TTx]

// waitLimit bounds every wait of the suite; reaching it fails the test.
const waitLimit = 30 * time.Second

// Run runs the conformance suite against the drivers newDriver returns,
// each case in a subtest of its own. A driver whose transaction values are
// batches (its Executor for one is a driver.Queuer) runs every case but
// those that read results inside the caller's transaction, and the Queuer
// case checks the capability's contract.
func Run[TTx any](t *testing.T, newDriver Factory[TTx]) {
	t.Helper()
	type testCase struct {
		name string
		run  func(*testing.T, driver.Driver[TTx])
		// direct: the case runs statements whose results it reads on the
		// caller's transaction, which a batch (driver.Queuer) cannot do.
		direct bool
	}
	cases := []testCase{
		{"Migrate", testMigrate[TTx], false},
		{"Session", testSession[TTx], false},
		{"EnqueueDeliverSettle", testDeliver[TTx], false},
		{"RolledBackEnqueueLeavesNoRow", testRollback[TTx], true},
		{"DuplicateMessageID", testDuplicate[TTx], false},
		{"UniqueViolationTranslated", testUniqueViolation[TTx], true},
		{"DeadlockTranslated", testDeadlock[TTx], true},
		{"Listen", testListen[TTx], false},
		{"ChangeFeed", testChangeFeed[TTx], false},
		{"InProcessWake", testInProcessWake[TTx], false},
		{"Queuer", testQueuer[TTx], false},
	}
	queues := queuesStatements(t, newDriver(t))
	for _, c := range cases {
		if c.direct && queues {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t)
			if _, err := outbox.Migrate(context.Background(), d, nil); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			c.run(t, d)
		})
	}
}

// ph is the n-th (1-based) placeholder of dialect d.
func ph(d driver.Dialect, n int) string {
	if d == driver.Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// count returns how many rows of outbox_messages match where (a condition
// with one placeholder for arg).
func count(t *testing.T, ex driver.Executor, d driver.Dialect, where string, arg any) int {
	t.Helper()
	rows, err := ex.Query(context.Background(), "SELECT count(*) FROM outbox_messages WHERE "+where+ph(d, 1), arg)
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	defer rows.Close()
	var n int
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			t.Fatalf("count: scan: %v", err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// enqueue commits msgs through a producer over d in a transaction of d's.
func enqueue[TTx any](t *testing.T, d driver.Driver[TTx], cfg *outbox.Config, msgs ...outbox.Message) []string {
	t.Helper()
	p, err := outbox.NewProducer(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	err = d.InTx(context.Background(), func(tx TTx) error {
		ids, err = p.EnqueueMany(context.Background(), tx, msgs)
		return err
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return ids
}

// sink is a PublisherFunc's memory: every envelope it was handed.
type sink struct {
	got chan *outbox.Envelope
}

func (s *sink) publish(_ context.Context, env *outbox.Envelope) error {
	s.got <- env
	return nil
}

// next waits for the next delivered envelope.
func (s *sink) next(t *testing.T, what string) *outbox.Envelope {
	t.Helper()
	select {
	case env := <-s.got:
		return env
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		return nil
	}
}

// startRelay runs a relay over d delivering to a sink until the test ends;
// poll is its poll interval while idle. onBatch, when set, sees every
// settled round.
func startRelay[TTx any](t *testing.T, d driver.Driver[TTx], poll time.Duration, onBatch func(outbox.BatchReport)) *sink {
	t.Helper()
	s := &sink{got: make(chan *outbox.Envelope, 64)}
	r, err := outbox.NewRelay(d, &outbox.RelayConfig{
		Routes:          []outbox.Route{{Pattern: "*", Publisher: outbox.PublisherFunc(s.publish)}},
		Workers:         1,
		LeaseTTL:        2 * time.Second,
		MinPollInterval: poll,
		MaxPollInterval: poll,
		OnBatch:         onBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("relay: %v", err)
			}
		case <-time.After(waitLimit):
			t.Errorf("relay did not stop within %v", waitLimit)
		}
	})
	return s
}

// waitStatus waits until the message id has status.
func waitStatus(t *testing.T, ex driver.Executor, d driver.Dialect, id, status string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for count(t, ex, d, "status = '"+status+"' AND message_id = ", id) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for message %s to be %s", waitLimit, id, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var errRollback = errors.New("drivertest: roll back")

func testMigrate[TTx any](t *testing.T, d driver.Driver[TTx]) {
	again, err := outbox.Migrate(context.Background(), d, nil)
	if err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if len(again) != 0 {
		t.Fatalf("second migrate applied %v; want nothing on a current schema", again)
	}
}

func testSession[TTx any](t *testing.T, d driver.Driver[TTx]) {
	ctx := context.Background()
	s, err := d.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = s.Close()
		}
	}()
	insert := "INSERT INTO outbox_messages (topic, payload) VALUES (" + ph(d.Dialect(), 1) + ", 'x')"
	err = s.InTx(ctx, func(ex driver.Executor) error {
		n, err := ex.Exec(ctx, insert, "drivertest.session")
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("insert changed %d rows, want 1", n)
		}
		if got := count(t, ex, d.Dialect(), "topic = ", "drivertest.session"); got != 1 {
			return fmt.Errorf("the transaction sees %d of its rows, want 1", got)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("session InTx returned %v, want fn's error", err)
	}
	if n := count(t, s, d.Dialect(), "topic = ", "drivertest.session"); n != 0 {
		t.Fatalf("%d rows after the session's transaction rolled back, want 0", n)
	}
	if n, err := s.Exec(ctx, insert, "drivertest.session"); err != nil || n != 1 {
		t.Fatalf("insert on the session: %d rows, %v", n, err)
	}
	// The pool may have no other connection (SQLite): hand this one back.
	closed = true
	if err := s.Close(); err != nil {
		t.Fatalf("close session: %v", err)
	}
	if n := count(t, d.Executor(), d.Dialect(), "topic = ", "drivertest.session"); n != 1 {
		t.Fatalf("the pool sees %d rows the session committed, want 1", n)
	}
}

func testDeliver[TTx any](t *testing.T, d driver.Driver[TTx]) {
	s := startRelay(t, d, 20*time.Millisecond, nil)
	ids := enqueue(t, d, nil, outbox.Message{
		Topic:   "drivertest.deliver",
		Key:     "key-1",
		Payload: []byte(`{"n":1}`),
		Headers: map[string]string{"h": "v"},
	})
	env := s.next(t, "the delivery")
	if env.ID != ids[0] || env.Topic != "drivertest.deliver" || env.Key != "key-1" || string(env.Payload) != `{"n":1}` || env.Headers["h"] != "v" {
		t.Fatalf("delivered %+v; want id %s, topic, key, payload and header as enqueued", env, ids[0])
	}
	waitStatus(t, d.Executor(), d.Dialect(), ids[0], "sent")
}

func testRollback[TTx any](t *testing.T, d driver.Driver[TTx]) {
	p, err := outbox.NewProducer(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	err = d.InTx(context.Background(), func(tx TTx) error {
		var err error
		if id, err = p.Enqueue(context.Background(), tx, outbox.Message{Topic: "drivertest.rollback", Payload: []byte(`"x"`)}); err != nil {
			return err
		}
		if n := count(t, d.UnwrapExecutor(tx), d.Dialect(), "message_id = ", id); n != 1 {
			return fmt.Errorf("the transaction sees %d rows of its message, want 1", n)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx returned %v, want fn's error", err)
	}
	if n := count(t, d.Executor(), d.Dialect(), "message_id = ", id); n != 0 {
		t.Fatalf("%d rows of a message whose transaction rolled back, want 0", n)
	}
}

func testDuplicate[TTx any](t *testing.T, d driver.Driver[TTx]) {
	const id = "0190a0a0-0000-7000-8000-000000000001"
	m := outbox.Message{ID: id, Topic: "drivertest.dup", Payload: []byte(`"x"`)}
	enqueue(t, d, nil, m)
	p, err := outbox.NewProducer(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]outbox.Message{{m}, {{Topic: "drivertest.dup", Payload: []byte(`"y"`)}, m}} {
		err = d.InTx(context.Background(), func(tx TTx) error {
			_, err := p.EnqueueMany(context.Background(), tx, batch)
			return err
		})
		if !errors.Is(err, outbox.ErrDuplicateMessageID) {
			t.Fatalf("enqueue of %d messages, one with a taken id: %v; want ErrDuplicateMessageID", len(batch), err)
		}
	}
	if n := count(t, d.Executor(), d.Dialect(), "topic = ", "drivertest.dup"); n != 1 {
		t.Fatalf("%d rows of topic drivertest.dup, want the first one only", n)
	}
}

func testUniqueViolation[TTx any](t *testing.T, d driver.Driver[TTx]) {
	const id = "0190a0a0-0000-7000-8000-000000000002"
	insert := "INSERT INTO outbox_messages (message_id, topic, payload) VALUES (" + ph(d.Dialect(), 1) + ", 'drivertest.unique', 'x')"
	ctx := context.Background()
	if _, err := d.Executor().Exec(ctx, insert, id); err != nil {
		t.Fatal(err)
	}
	_, err := d.Executor().Exec(ctx, insert, id)
	if !errors.Is(err, driver.ErrUniqueViolation) {
		t.Fatalf("second insert of message_id %s: %v; want an error marked driver.ErrUniqueViolation", id, err)
	}
	if errors.Is(err, driver.ErrDeadlock) {
		t.Fatalf("a unique violation marked as a deadlock: %v", err)
	}
	err = d.InTx(ctx, func(tx TTx) error {
		_, err := d.UnwrapExecutor(tx).Exec(ctx, insert, id)
		return err
	})
	if !errors.Is(err, driver.ErrUniqueViolation) {
		t.Fatalf("insert of a taken message_id in a transaction: %v; want driver.ErrUniqueViolation", err)
	}
}

func testDeadlock[TTx any](t *testing.T, d driver.Driver[TTx]) {
	if d.Dialect() == driver.SQLite {
		t.Skip("SQLite serialises writers: there is no deadlock to provoke")
	}
	ids := enqueue(t, d, nil,
		outbox.Message{Topic: "drivertest.deadlock", Payload: []byte(`"a"`)},
		outbox.Message{Topic: "drivertest.deadlock", Payload: []byte(`"b"`)})
	touch := "UPDATE outbox_messages SET attempts = attempts WHERE message_id = " + ph(d.Dialect(), 1)
	ctx := context.Background()
	// Each transaction locks one row, waits until the other holds the other
	// row, then asks for it: the database must abort one of them.
	var holding sync.WaitGroup
	holding.Add(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			errs[i] = d.InTx(ctx, func(tx TTx) error {
				ex := d.UnwrapExecutor(tx)
				if _, err := ex.Exec(ctx, touch, ids[i]); err != nil {
					holding.Done()
					return err
				}
				holding.Done()
				holding.Wait()
				_, err := ex.Exec(ctx, touch, ids[1-i])
				return err
			})
		})
	}
	wg.Wait()
	victims := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, driver.ErrDeadlock):
			victims++
		default:
			t.Fatalf("deadlocked transaction: %v; want nil or an error marked driver.ErrDeadlock", err)
		}
	}
	if victims == 0 {
		t.Fatal("both transactions of a deadlock committed")
	}
}

func testListen[TTx any](t *testing.T, d driver.Driver[TTx]) {
	l, ok := d.(driver.Listener)
	if !ok || !l.SupportsListen() {
		t.Skip("the driver does not listen")
	}
	ctx, cancel := context.WithCancel(context.Background())
	wakes := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- l.Listen(ctx, "outbox_drivertest", func() {
			select {
			case wakes <- struct{}{}:
			default:
			}
		})
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case err := <-done:
			t.Fatalf("Listen returned %v while waiting for %s", err, what)
		case <-time.After(waitLimit):
			t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		}
	}
	wait("the wake-up once listening")
	if err := l.Notify(ctx, "outbox_drivertest"); err != nil {
		t.Fatal(err)
	}
	wait("the wake-up of a notification")
	cancel()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("Listen did not return after its context was cancelled")
	}
}

// testChangeFeed: a driver that is a driver.ChangeFeed calls changed
// once it follows the commits, then for a committed Enqueue, and stops
// without an error when its context ends.
func testChangeFeed[TTx any](t *testing.T, d driver.Driver[TTx]) {
	f, ok := d.(driver.ChangeFeed)
	if !ok {
		t.Skip("the driver has no change feed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- f.Watch(ctx, "outbox_messages", func() {
			select {
			case changes <- struct{}{}:
			default:
			}
		})
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-changes:
		case err := <-done:
			t.Fatalf("Watch returned %v while waiting for %s", err, what)
		case <-time.After(waitLimit):
			t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		}
	}
	wait("the call once following")
	enqueue(t, d, nil, outbox.Message{Topic: "drivertest.feed", Payload: []byte(`1`)})
	wait("the call for a committed Enqueue")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Watch ended by its context returned %v, want nil", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Watch did not return after its context was cancelled")
	}
}

func testInProcessWake[TTx any](t *testing.T, d driver.Driver[TTx]) {
	_ = map[any]bool{d.Identity(): true} // panics unless comparable
	// A relay that polls every ten minutes once idle: the second message
	// can only arrive in time through a wake-up from the producer.
	rounds := make(chan struct{}, 16)
	s := startRelay(t, d, 10*time.Minute, func(outbox.BatchReport) { rounds <- struct{}{} })
	// A producer wakes relays NotifyInterval after Enqueue returns, not
	// after the commit: the interval must outlast the commit, or the relay
	// reads before the message is there and, polling every ten minutes,
	// misses it (on a busy machine a commit can take tens of milliseconds).
	cfg := &outbox.Config{NotifyInterval: 500 * time.Millisecond, DisableNotify: true}
	enqueue(t, d, cfg, outbox.Message{Topic: "drivertest.wake", Payload: []byte(`1`)})
	s.next(t, "the first message")
	select {
	case <-rounds:
	case <-time.After(waitLimit):
		t.Fatal("no settled round reported")
	}
	ids := enqueue(t, d, cfg, outbox.Message{Topic: "drivertest.wake", Payload: []byte(`2`)})
	if env := s.next(t, "the message enqueued while the relay was idle"); env.ID != ids[0] {
		t.Fatalf("delivered %s, want %s", env.ID, ids[0])
	}
}

// queuesStatements reports whether d's transaction values are batches:
// the Executor of one is a driver.Queuer.
func queuesStatements[TTx any](t *testing.T, d driver.Driver[TTx]) bool {
	var queues bool
	errProbe := errors.New("probe")
	err := d.InTx(context.Background(), func(tx TTx) error {
		_, queues = d.UnwrapExecutor(tx).(driver.Queuer)
		return errProbe
	})
	if !errors.Is(err, errProbe) {
		t.Fatalf("InTx returned %v, want the error of its function", err)
	}
	return queues
}

// testQueuer: a driver whose transaction values are batches (driver.Queuer
// on the Executor UnwrapExecutor returns) runs a queued statement when the
// batch is sent, calls its check with the rows it changed, and fails the
// batch with the check's error. Drivers without the capability pass.
func testQueuer[TTx any](t *testing.T, d driver.Driver[TTx]) {
	ctx := context.Background()
	enqueue(t, d, nil, outbox.Message{Topic: "drivertest.queued", Payload: []byte(`"x"`)}, outbox.Message{Topic: "drivertest.queued", Payload: []byte(`"y"`)})
	update := "UPDATE outbox_messages SET max_attempts = max_attempts WHERE topic = " + ph(d.Dialect(), 1)
	var offered bool
	var changed []int64
	err := d.InTx(ctx, func(tx TTx) error {
		q, ok := d.UnwrapExecutor(tx).(driver.Queuer)
		if !ok {
			return nil
		}
		offered = true
		q.QueueExec(update, []any{"drivertest.queued"}, func(n int64) error { changed = append(changed, n); return nil })
		q.QueueExec(update, []any{"drivertest.none"}, func(n int64) error { changed = append(changed, n); return nil })
		if len(changed) != 0 {
			t.Errorf("a check ran before the batch was sent")
		}
		return nil
	})
	if !offered {
		return
	}
	if err != nil || len(changed) != 2 || changed[0] != 2 || changed[1] != 0 {
		t.Fatalf("a sent batch: error %v, checks saw %v rows; want nil and [2 0]", err, changed)
	}
	errCheck := errors.New("the check refuses")
	err = d.InTx(ctx, func(tx TTx) error {
		d.UnwrapExecutor(tx).(driver.Queuer).QueueExec(update, []any{"drivertest.queued"}, func(int64) error { return errCheck })
		return nil
	})
	if !errors.Is(err, errCheck) {
		t.Fatalf("a batch whose check fails: %v; want the check's error", err)
	}
}
