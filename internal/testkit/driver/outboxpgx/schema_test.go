package outboxpgx_test

import (
	"context"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestListenIgnoresOtherSchemas: the schemas of one database share its
// NOTIFY channels, so a producer's signal names its outbox's schema and a
// relay listening from another schema is not woken by it; a signal from
// its own schema, or one with an empty payload (plain SQL), wakes it.
func TestListenIgnoresOtherSchemas(t *testing.T) {
	a, b := testdb.New(t, store.Postgres), testdb.New(t, store.Postgres)
	channel := testdb.RandomName("outbox_schema_")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- a.PGX.Listen(ctx, channel, func() {
			select {
			case wakes <- struct{}{}:
			default:
			}
		})
	}()
	woken := func(within time.Duration) bool {
		select {
		case <-wakes:
			return true
		case err := <-done:
			t.Fatalf("Listen returned %v", err)
		case <-time.After(within):
		}
		return false
	}
	if !woken(30 * time.Second) {
		t.Fatal("no wake-up once listening")
	}
	for woken(200 * time.Millisecond) { // the probe's own wake-ups
	}
	// A wake-up of the probe's may still come late on a loaded machine:
	// a signal from the other schema counts as waking the listener only
	// if each of three does.
	stray := 0
	for range 3 {
		if err := b.PGX.Notify(ctx, channel); err != nil {
			t.Fatal(err)
		}
		if woken(time.Second) {
			stray++
		}
	}
	if stray == 3 {
		t.Error("a signal from another schema's producer woke the listener")
	}
	if err := a.PGX.Notify(ctx, channel); err != nil {
		t.Fatal(err)
	}
	if !woken(30 * time.Second) {
		t.Error("a signal from the listener's own schema did not wake it")
	}
	b.Exec(t, "SELECT pg_notify($1, '')", channel)
	if !woken(30 * time.Second) {
		t.Error("a signal with an empty payload did not wake the listener")
	}
}
