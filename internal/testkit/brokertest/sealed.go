package brokertest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/seal"
)

// sealedArrives: payloads sealed at enqueue arrive plain, byte for byte,
// through a route that opens them, and sealed, with their algorithm and
// key id headers, through a route that passes them on, where the
// consumer's keys open them.
func sealedArrives(t *testing.T, tg *Target) {
	ctx := context.Background()
	db := testdb.New(t, store.Postgres)
	keys := relaytest.KeyFile(t)
	open, pass := tg.NewDestination(t), tg.NewDestination(t)
	plain := []byte(`{"email":"alice@example.com"}`)
	ids := relaytest.Produce(t, db, &outbox.Config{Seal: &outbox.SealConfig{Keys: keys, Algorithm: seal.XChaCha20Poly1305}},
		outbox.Message{Topic: open, Key: "k", Payload: plain}, outbox.Message{Topic: pass, Key: "k", Payload: plain})
	cfg := relayConfig(tg.Publisher)
	cfg.Keys = keys
	cfg.Routes = []outbox.Route{{Pattern: pass, Publisher: tg.Publisher, Sealed: outbox.SealedPass}, {Pattern: "*", Publisher: tg.Publisher}}
	relaytest.Start(t, db, cfg)

	got := tg.Receive(t, open, 1)[0]
	if got.ID != ids[0] || !bytes.Equal(got.Payload, plain) {
		t.Errorf("opened route: %s %q, want %s %q", got.ID, got.Payload, ids[0], plain)
	}
	if _, sealed := got.Headers[seal.HeaderAlgorithm]; sealed {
		t.Errorf("opened route: seal headers arrived: %v", got.Headers)
	}
	got = tg.Receive(t, pass, 1)[0]
	if bytes.Contains(got.Payload, []byte("alice")) || got.Headers[seal.HeaderKeyID] != "k1" || got.Headers[seal.HeaderAlgorithm] != string(seal.XChaCha20Poly1305) {
		t.Fatalf("passing route: %q %v", got.Payload, got.Headers)
	}
	m := &inbox.Message{ID: got.ID, Topic: got.Topic, Headers: got.Headers, Payload: got.Payload}
	if err := m.Open(ctx, keys); err != nil || !bytes.Equal(m.Payload, plain) {
		t.Errorf("consumer opened %q, %v", m.Payload, err)
	}
	relaytest.WaitFor(t, 10*time.Second, "both marked sent", func() bool { return relaytest.Count(t, db, "sent") == 2 })
}
