package outboxnats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestRelayMissingStreamRouteDown runs `outbox relay` to NATS for a
// subject no stream captures: the route goes down and is alerted, nothing
// goes dead or is recorded sent, `outbox status` shows it; once the stream
// is created every message is delivered.
func TestRelayMissingStreamRouteDown(t *testing.T) {
	_, js := connect(t)
	name := testdb.RandomName("outboxtest_")
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	var msgs []outbox.Message
	for i := range 30 {
		msgs = append(msgs, outbox.Message{Topic: name + ".created", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	if _, err := e.Enqueue(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	p := relaytest.StartRelay(t, db.URL, "--to", natsURL+"?probe_max=2s", "--alert-route-down", "2s")
	relaytest.WaitFor(t, time.Minute, "the route down and alerted", func() bool {
		return p.Logged("route down:") == 1 && p.Logged("kind=route_down") == 1
	})
	if sent, dead := relaytest.Count(t, db, store.StatusSent), relaytest.Count(t, db, store.StatusDead); sent != 0 || dead != 0 {
		t.Fatalf("while no stream exists: %d sent, %d dead; want none", sent, dead)
	}
	var st struct {
		Routes []struct{ Route, State, Reason string }
	}
	p.Status(t, &st)
	if len(st.Routes) != 1 || st.Routes[0].State != "down" || st.Routes[0].Reason == "" {
		t.Fatalf("outbox status routes: %+v, want the route down with its reason", st.Routes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	relaytest.WaitFor(t, time.Minute, "30 sent", func() bool { return relaytest.Count(t, db, store.StatusSent) == 30 })
	relaytest.WaitFor(t, 30*time.Second, "the route up again", func() bool {
		return p.Logged("route up again after") == 1 && p.Logged("kind=route_up") == 1
	})
	p.Stop(t)
	if n := streamCount(t, js, name); n != 30 || relaytest.Count(t, db, store.StatusDead) != 0 {
		t.Fatalf("stream holds %d, want 30; dead %d", n, relaytest.Count(t, db, store.StatusDead))
	}
}
