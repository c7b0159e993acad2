package outboxurl_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// TestCheckURLStopsTheResend: a receiver applies each message and then
// answers too late, so the relay's attempt ends unknown; before sending
// again the relay asks the webhook's check_url, which says the message was
// processed, and marks it sent without a second delivery. The check URL's
// parameter never reaches the receiver.
func TestCheckURLStopsTheResend(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	var mu sync.Mutex
	applied := map[string]int{}
	var asked atomic.Int32
	var leaked atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("check_url") {
			leaked.Store(true)
		}
		mu.Lock()
		applied[r.Header.Get("webhook-id")]++
		mu.Unlock()
		time.Sleep(time.Second) // the effect is done, the answer comes after the relay gave up
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /processed/{id}", func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		mu.Lock()
		n := applied[r.PathValue("id")]
		mu.Unlock()
		if n == 0 {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	pub, err := outboxurl.Open(srv.URL+"/hooks?tenant=acme&check_url="+url.QueryEscape(srv.URL+"/processed/{id}"), &outboxurl.Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pub.(publisher.Checker); !ok {
		t.Fatalf("a webhook with check_url opens as %T, which is not an publisher.Checker", pub)
	}
	ids, err := relaytest.NewEnqueuer(t, db).Enqueue(t.Context(), []outbox.Message{
		{Topic: "order.created", Payload: []byte(`{"order_id":1}`)},
		{Topic: "order.created", Payload: []byte(`{"order_id":2}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Start(t, db, relaytest.Config(pub))
	relaytest.WaitFor(t, time.Minute, "both messages marked sent", func() bool { return relaytest.Count(t, db, "sent") == len(ids) })
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if applied[id] != 1 {
			t.Errorf("message %s reached the receiver %d times, want once", id, applied[id])
		}
	}
	if asked.Load() < int32(len(ids)) {
		t.Errorf("the check URL was asked %d times for %d uncertain messages", asked.Load(), len(ids))
	}
	if leaked.Load() {
		t.Error("check_url was sent to the receiver in the webhook's query")
	}
	for _, bad := range []string{"/hooks?check_url=%zz", "/hooks?check_url=" + url.QueryEscape("https://h/processed")} {
		if _, err := outboxurl.Open(srv.URL+bad, nil); err == nil || !strings.Contains(strings.ToLower(err.Error()), "check") {
			t.Errorf("Open(%q) = %v, want an error about the check URL", bad, err)
		}
	}
}
