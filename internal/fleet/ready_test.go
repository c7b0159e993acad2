package fleet

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
)

// downStore is a database that answers at start and then fails every
// lease statement, as one that goes away would.
type downStore struct {
	relay.Store // nil: any other statement panics
}

func (downStore) Partitions(context.Context) (int, error)        { return 1, nil }
func (downStore) CheckSchema(context.Context) error              { return nil }
func (downStore) ServerAdvice(context.Context) ([]string, error) { return nil, nil }
func (downStore) DropRelay(context.Context, string) error        { return nil }
func (downStore) Heartbeat(context.Context, string, string, time.Duration) ([]store.Relay, error) {
	return nil, errors.New("connection refused")
}

// TestRelaysReady: Ready names the database whose relay is not ready,
// and is nil once no relay runs.
func TestRelaysReady(t *testing.T) {
	cfg := relay.Config{ID: "m1", Logger: slog.New(slog.DiscardHandler), Store: downStore{}, Workers: 1}
	cfg.SetDefaults()
	cfg.LeaseTTL = 500 * time.Millisecond
	rs := &Relays{Relay: cfg, Open: func(context.Context, string) (*store.Backend, func(), bool, error) {
		return &store.Backend{}, nil, true, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rs.Serve(ctx, Database{Name: "shop"}) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := rs.Ready()
		if err != nil {
			if !strings.Contains(err.Error(), "database shop: ") || !strings.Contains(err.Error(), "lease renewals failing") {
				t.Fatalf("Ready = %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Ready still nil with the database's lease statements failing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := rs.Ready(); err != nil {
		t.Fatalf("Ready with no relay running = %v", err)
	}
}
