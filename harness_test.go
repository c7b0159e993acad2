package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// harness runs the same scenario over every driver.
type harness struct {
	name string
	db   *testdb.DB
	// enqueue commits msgs in one transaction; with rollback it rolls back.
	enqueue func(ctx context.Context, msgs []outbox.Message, rollback bool) ([]string, error)
	// newRelay builds a relay over the driver.
	newRelay func(cfg *outbox.RelayConfig) (*outbox.Relay, error)
}

type driverCase struct {
	name    string
	dialect store.Dialect
	pgx     bool
}

var driverCases = []driverCase{
	{"pgx", store.Postgres, true},
	{"sql-postgres", store.Postgres, false},
	{"mysql", store.MySQL, false},
	{"sqlite", store.SQLite, false},
}

func newHarness(t *testing.T, c driverCase) *harness {
	t.Helper()
	db := testdb.New(t, c.dialect)
	h := &harness{name: c.name, db: db}
	if c.pgx {
		p, err := outbox.NewProducer(db.PGX, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.enqueue = func(ctx context.Context, msgs []outbox.Message, rollback bool) ([]string, error) {
			tx, err := db.Pool.Begin(ctx)
			if err != nil {
				return nil, err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			ids, err := p.EnqueueMany(ctx, tx, msgs)
			if err != nil || rollback {
				return ids, err
			}
			return ids, tx.Commit(ctx)
		}
		h.newRelay = func(cfg *outbox.RelayConfig) (*outbox.Relay, error) { return outbox.NewRelay(db.PGX, cfg) }
		return h
	}
	p, err := outbox.NewProducer(db.Std, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.enqueue = func(ctx context.Context, msgs []outbox.Message, rollback bool) ([]string, error) {
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		ids, err := p.EnqueueMany(ctx, tx, msgs)
		if err != nil || rollback {
			return ids, err
		}
		return ids, tx.Commit()
	}
	h.newRelay = func(cfg *outbox.RelayConfig) (*outbox.Relay, error) { return outbox.NewRelay(db.Std, cfg) }
	return h
}

// eachDriver runs fn once per driver, in parallel subtests.
func eachDriver(t *testing.T, fn func(t *testing.T, h *harness)) {
	for _, c := range driverCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newHarness(t, c))
		})
	}
}

// sink records deliveries.
type sink struct {
	mu    sync.Mutex
	got   []*outbox.Envelope
	count map[string]int
	fail  func(env *outbox.Envelope) error
	ch    chan struct{}
}

func newSink() *sink { return &sink{count: map[string]int{}, ch: make(chan struct{}, 1)} }

func (s *sink) publish(_ context.Context, env *outbox.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(env); err != nil {
			return err
		}
	}
	s.got = append(s.got, env)
	s.count[env.ID]++
	select {
	case s.ch <- struct{}{}:
	default:
	}
	return nil
}

func (s *sink) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.count)
}

func (s *sink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func fastRelayConfig(routes ...outbox.Route) *outbox.RelayConfig {
	return &outbox.RelayConfig{
		Routes:          routes,
		Logger:          relaytest.Logger(),
		LeaseTTL:        2 * time.Second,
		MaxPollInterval: 100 * time.Millisecond,
		Retry:           outbox.RetryPolicy{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond},
	}
}

func msgs(n int, topic string, key func(i int) string) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{Topic: topic, Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		if key != nil {
			out[i].Key = key(i)
		}
	}
	return out
}
