package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/testkit/harness"
)

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

// newRelay is a relay over h's database with cfg, failing the test if
// it cannot be made.
func newRelay(t *testing.T, h *harness.Harness, cfg *outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	r, err := h.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// enqueue commits ms through h's producer and returns their message ids,
// failing the test on error.
func enqueue(t *testing.T, h *harness.Harness, ctx context.Context, ms []outbox.Message) []string {
	t.Helper()
	ids, err := h.Enqueue(ctx, ms, false)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
