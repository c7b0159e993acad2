package outboxmqtt_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/seal"
)

// TestCloudEventsClaimCheckAndSeal: a relay over PostgreSQL publishes to
// Mosquitto as CloudEvents (format=cloudevents) a claim-checked message
// on a route that passes references, one whose blob is also sealed, and
// a sealed one (with a sealed header) on a route that passes sealed
// payloads. None goes dead: on the wire the claim-check and seal headers
// are the extension attributes outboxclaimcheck, outboxclaimsize,
// outboxclaimsha256, outboxseal, outboxsealkey and outboxsealheaders, and
// every user property is a valid attribute name; Consume reads them back
// under their outbox names, so that inbox.Message.Resolve fetches the
// blob and Open opens the seal, giving the payloads byte for byte.
func TestCloudEventsClaimCheckAndSeal(t *testing.T) {
	requireBroker(t)
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t, store.Postgres)
	blobs, err := claimcheck.OpenDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "keys.json")
	if _, err := seal.CreateKey(keyPath, "", true); err != nil {
		t.Fatal(err)
	}
	keys, err := seal.OpenFileKeys(keyPath)
	if err != nil {
		t.Fatal(err)
	}

	prefix := "ce" + randomHex(5)
	ref, refSealed, pass := prefix+".ref", prefix+".refsealed", prefix+".pass"
	raw := subscribe(t, brokerAddr, prefix+"/#")
	var mu sync.Mutex
	got := map[string]*inbox.Message{}
	runConsume(t, consumeConfig(brokerAddr, prefix+"/#"), func(_ context.Context, m *inbox.Message) error {
		mu.Lock()
		got[m.ID] = m
		mu.Unlock()
		return nil
	})

	large := []byte(`{"doc":"` + strings.Repeat("scan ", 400) + `"}`)
	secret := []byte(`{"email":"dana@example.com","doc":"` + strings.Repeat("page ", 200) + `"}`)
	small := []byte(`{"email":"eli@example.com"}`)
	p, err := outbox.NewProducer(db.PGX, &outbox.Config{
		ClaimCheck: &outbox.ClaimCheckConfig{Store: blobs, Threshold: 256, Topics: []string{ref, refSealed}},
		Seal:       &outbox.SealConfig{Keys: keys, Topics: []string{refSealed, pass}, Headers: []string{"x-email"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := p.EnqueueMany(ctx, tx, []outbox.Message{
		{Topic: ref, Key: "doc-1", Payload: large},
		{Topic: refSealed, Key: "doc-2", Payload: secret},
		{Topic: pass, Key: "user-3", Payload: small, Headers: map[string]string{"x-email": "eli@example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	pub := dial(t, brokerAddr, &outboxmqtt.DialConfig{Config: outboxmqtt.Config{CloudEvents: &outboxce.Format{Mode: outboxce.Binary, Source: "/documents"}}})
	rc := relaytest.Config(pub)
	rc.Keys = keys
	rc.Routes = []outbox.Route{
		{Pattern: ref, Publisher: pub, ClaimCheck: outbox.ClaimReference},
		{Pattern: refSealed, Publisher: pub, ClaimCheck: outbox.ClaimReference, Sealed: outbox.SealedPass},
		{Pattern: pass, Publisher: pub, Sealed: outbox.SealedPass},
	}
	relaytest.Start(t, db, rc)
	relaytest.WaitFor(t, 30*time.Second, "the three messages settled", func() bool { return relaytest.Count(t, db, "pending") == 0 })
	rows, err := db.Pool.Query(ctx, "SELECT message_id, status, last_error FROM outbox_messages WHERE status <> 'sent'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, status string
		var lastErr sql.NullString
		if err := rows.Scan(&id, &status, &lastErr); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s is %s: %s", id, status, lastErr.String)
	}
	rows.Close()
	if t.Failed() {
		t.FailNow()
	}

	// The wire: attributes only, the outbox headers as extensions.
	wire := raw.wait(t, 3, 20*time.Second)
	for _, m := range wire {
		for k := range m.Headers {
			if !outboxce.ValidExtensionName(k) {
				t.Errorf("message on %s: user property %q is no CloudEvents attribute name", m.Destination, k)
			}
		}
		if m.Headers[outboxce.AttrSpecVersion] != "1.0" || m.Headers[outboxce.AttrSource] != "/documents" {
			t.Errorf("message on %s is not a CloudEvent: %v", m.Destination, m.Headers)
		}
		switch m.Destination {
		case outboxmqtt.Topic(ref):
			if len(m.Payload) != 0 || !strings.HasPrefix(m.Headers["outboxclaimcheck"], "file:"+ids[0]+".") ||
				m.Headers["outboxclaimsize"] != strconv.Itoa(len(large)) || len(m.Headers["outboxclaimsha256"]) != 64 {
				t.Errorf("reference message on the wire: %d bytes, %v", len(m.Payload), m.Headers)
			}
		case outboxmqtt.Topic(pass):
			if bytes.Contains(m.Payload, []byte("eli@")) || m.Headers["outboxseal"] != "aes-256-gcm" || m.Headers["outboxsealkey"] != "k1" ||
				m.Headers["outboxsealheaders"] == "" || strings.Contains(m.Headers["outboxsealheaders"], "eli@") {
				t.Errorf("sealed message on the wire: %q, %v", m.Payload, m.Headers)
			}
		}
	}

	relaytest.WaitFor(t, 20*time.Second, "Consume to read the three", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	for i, want := range [][]byte{large, secret, small} {
		m := got[ids[i]]
		if m == nil {
			t.Fatalf("message %d (%s) not consumed", i, ids[i])
		}
		for k := range m.Headers {
			if strings.HasPrefix(k, "outboxclaim") || strings.HasPrefix(k, "outboxseal") {
				t.Errorf("message %d: the extension %q is left among the headers: %v", i, k, m.Headers)
			}
		}
		if err := m.Resolve(ctx, blobs); err != nil {
			t.Fatalf("message %d: Resolve: %v (headers %v)", i, err, m.Headers)
		}
		if err := m.Open(ctx, keys); err != nil {
			t.Fatalf("message %d: Open: %v (headers %v)", i, err, m.Headers)
		}
		if !bytes.Equal(m.Payload, want) {
			t.Errorf("message %d: payload %q, want %q", i, m.Payload, want)
		}
		if !json.Valid(m.Payload) || m.ContentType != "application/json" || m.Topic != []string{ref, refSealed, pass}[i] {
			t.Errorf("message %d: topic %s, content type %s", i, m.Topic, m.ContentType)
		}
	}
	if m := got[ids[2]]; m.Headers["x-email"] != "eli@example.com" {
		t.Errorf("the sealed header after Open: %v", m.Headers)
	}
	if m := got[ids[0]]; len(m.Headers[claimcheck.HeaderRef]) != 0 {
		t.Errorf("the reference is left after Resolve: %v", m.Headers)
	}
}
