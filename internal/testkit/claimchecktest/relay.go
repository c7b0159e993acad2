package claimchecktest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// Deliver checks the outbox command's relay with the claim-check store
// it opens from the --claim-check value url, over b: a producer keeps a
// 2 MiB payload in b (its rows bounded to 64 KiB), the message's row
// holds an empty payload and a reference of b.Scheme and the bucket its
// one object; the relay, its --max-payload-bytes raised above the
// payload (which it still bounds), fetches it and delivers it whole to a
// webhook. The relay finds the store's credentials, if any, in the test's
// environment (set with t.Setenv, so the test cannot be parallel).
// Deliver returns the relay, stopped, whose Bin runs other commands.
func Deliver(t *testing.T, db *testdb.DB, b Bucket, url string) *relaytest.Process {
	t.Helper()
	cfg := &outbox.Config{MaxPayloadBytes: 64 << 10, ClaimCheck: &outbox.ClaimCheckConfig{Store: b.Store, Threshold: 64 << 10}}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 128<<10) // 2 MiB
	id := Produce(t, db, cfg, outbox.Message{Topic: "claim." + b.Scheme, ContentType: "application/octet-stream", Payload: payload})[0]
	if n := db.Count(t, testdb.Placeholder(db.Dialect, "SELECT count(*) FROM outbox_messages WHERE message_id = ? AND payload = ''"), id); n != 1 {
		t.Fatalf("message %s: its row holds a payload, want it in the store", id)
	}
	if ref := Ref(t, db, id); ref.Scheme != b.Scheme {
		t.Fatalf("the message's reference %s, want one of scheme %s", ref, b.Scheme)
	}
	if objects := b.Objects(t); len(objects) != 1 {
		t.Fatalf("objects under %s: %v; want 1", b.Prefix, objects)
	}

	var mu sync.Mutex
	var got []byte
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = body
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	t.Setenv("OUTBOX_WEBHOOK_SECRET", "claim-check-"+b.Scheme+"-test-secret")
	relay := relaytest.StartRelay(t, db.URL, "--to", hook.URL, "--claim-check", url, "--max-payload-bytes", "4194304", "--max-poll", "50ms")
	relaytest.WaitFor(t, time.Minute, "the payload delivered and the message sent", func() bool {
		return relaytest.Count(t, db, "sent") == 1
	})
	relay.Stop(t)
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(got, payload) {
		t.Errorf("delivered %d bytes, want the %d of the payload", len(got), len(payload))
	}
	return relay
}
