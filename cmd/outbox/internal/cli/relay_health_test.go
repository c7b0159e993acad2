package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testnats"
)

// scrape GETs url and returns the status and body ("" when the request
// fails, as while the listener is not up yet).
func scrape(url string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, ""
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestRelayNATSDownAtStart runs `outbox relay` with a NATS server of the
// test's own stopped and a webhook route beside it: the relay starts, the
// webhook's messages are delivered, the NATS route shows down in
// outbox_circuit_open; once NATS is up its messages are delivered and the
// route is up again.
func TestRelayNATSDownAtStart(t *testing.T) {
	t.Parallel()
	srv := testnats.StartServer(t)
	_, js := brokertest.JetStream(t, srv.URL())
	stream := testdb.RandomName("natsdown_")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	var hooks atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hooks.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()

	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	var msgs []outbox.Message
	for i := range 5 {
		msgs = append(msgs, outbox.Message{Topic: "hook.created", Payload: fmt.Appendf(nil, `{"n":%d}`, i)},
			outbox.Message{Topic: stream + ".created", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	if _, err := e.Enqueue(ctx, msgs); err != nil {
		t.Fatal(err)
	}

	metrics := "127.0.0.1:" + strconv.Itoa(brokertest.FreePort(t))
	natsRoute := stream + ".>"
	p := relaytest.StartRelay(t, db.URL, "--metrics", metrics,
		"--route", "hook.*="+hook.URL+"/hooks",
		"--route", natsRoute+"="+srv.URL()+"?reconnect_wait=100ms&probe_max=1s")
	down := fmt.Sprintf("outbox_circuit_open{route=%q} 1", natsRoute)
	up := fmt.Sprintf("outbox_circuit_open{route=%q} 0", natsRoute)
	relaytest.WaitFor(t, time.Minute, "the webhook's 5 messages and the NATS route down", func() bool {
		_, body := scrape("http://" + metrics + "/metrics")
		return relaytest.Count(t, db, store.StatusSent) == 5 && strings.Contains(body, down)
	})
	if n := hooks.Load(); n != 5 {
		t.Fatalf("the webhook got %d requests, want 5", n)
	}
	if !strings.Contains(p.Log(), "connecting in the background") || p.Logged("route down:") != 1 {
		t.Errorf("the log does not say NATS is not there and the route is down:\n%s", p.Log())
	}

	srv.Start(t)
	relaytest.WaitFor(t, time.Minute, "all 10 sent and the NATS route up", func() bool {
		_, body := scrape("http://" + metrics + "/metrics")
		return relaytest.Count(t, db, store.StatusSent) == 10 && strings.Contains(body, up)
	})
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 5 {
		t.Fatalf("the stream holds %v messages (%v), want 5", info.State.Msgs, err)
	}
	p.Stop(t)
	if n := relaytest.Count(t, db, store.StatusDead); n != 0 {
		t.Fatalf("%d dead, want none", n)
	}
}

// TestRelayEveryKindDownAtStart runs `outbox relay` with a route of each
// destination kind to a refused port (a listener opened and closed) and
// a webhook that answers: the relay starts, delivers the webhook's
// messages, and takes each of the other routes down at its first
// message, charging nothing.
func TestRelayEveryKindDownAtStart(t *testing.T) {
	t.Parallel()
	var hooks atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hooks.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	dead := "127.0.0.1:" + strconv.Itoa(brokertest.FreePort(t))
	kinds := map[string]string{
		"nats":    "nats://" + dead,
		"kafka":   "kafka://" + dead,
		"redis":   "redis://" + dead + "/0",
		"mqtt":    "mqtt://" + dead,
		"amqp":    "amqp://guest:guest@" + dead + "/",
		"webhook": "http://" + dead + "/hooks",
	}
	db := testdb.New(t, store.Postgres)
	e := relaytest.NewEnqueuer(t, db)
	args := []string{"--route", "live.*=" + hook.URL + "/hooks"}
	msgs := []outbox.Message{{Topic: "live.a", Payload: []byte(`{}`)}, {Topic: "live.b", Payload: []byte(`{}`)}}
	for kind, to := range kinds {
		args = append(args, "--route", kind+".*="+to)
		msgs = append(msgs, outbox.Message{Topic: kind + ".created", Payload: []byte(`{}`)})
	}
	if _, err := e.Enqueue(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	metrics := "127.0.0.1:" + strconv.Itoa(brokertest.FreePort(t))
	p := relaytest.StartRelay(t, db.URL, append(args, "--metrics", metrics)...)
	relaytest.WaitFor(t, 2*time.Minute, "the webhook's messages sent and every other route down", func() bool {
		_, body := scrape("http://" + metrics + "/metrics")
		for kind := range kinds {
			if !strings.Contains(body, fmt.Sprintf("outbox_circuit_open{route=%q} 1", kind+".*")) {
				return false
			}
		}
		return relaytest.Count(t, db, store.StatusSent) == 2
	})
	p.Stop(t)
	if n, dead := hooks.Load(), relaytest.Count(t, db, store.StatusDead); n != 2 || dead != 0 {
		t.Fatalf("webhook requests %d (want 2), dead %d (want 0)", n, dead)
	}
}

// TestRelayBadDestinationIsUsage: a destination that cannot be opened
// for what its URL says, not for a server that is down, still stops the
// relay at start with exit status 2 and one line.
func TestRelayBadDestinationIsUsage(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	dead := "127.0.0.1:" + strconv.Itoa(brokertest.FreePort(t))
	for _, tc := range []struct{ to, want string }{
		{"nats://" + dead + "?ca_file=/nonexistent/ca.pem", "ca_file"},
		{"kafka://" + dead + "?bogus=1", "unknown parameter"},
		{"nats://" + dead + "?max_pending=0", "max_pending"},
		{"gopher://" + dead, "unknown scheme"},
	} {
		run(t, vars, "relay", "--to", tc.to).failed(t, ExitUsage, tc.want)
	}
}

// dbErrors sums outbox_database_errors_total over its classes in a
// scrape.
func dbErrors(body string) float64 {
	total := 0.0
	for _, m := range regexp.MustCompile(`(?m)^outbox_database_errors_total\{[^}]*\} (\S+)$`).FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		total += v
	}
	return total
}

// TestRelayReadyFollowsDatabase runs `outbox relay --metrics` over a
// proxy in front of PostgreSQL, then cuts the proxy: /readyz turns 503,
// saying nothing of the database's user, name or host, and
// outbox_database_errors_total grows; once the proxy passes traffic again
// /readyz is 200 again.
func TestRelayReadyFollowsDatabase(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, u.Host)
	dbHost, dbName, dbUser := u.Hostname(), strings.TrimPrefix(u.Path, "/"), u.User.Username()
	u.Host = proxy.Addr()
	metrics := "127.0.0.1:" + strconv.Itoa(brokertest.FreePort(t))
	p := relaytest.StartRelay(t, u.String(), "--to", "stdout://", "--metrics", metrics, "--max-poll", "200ms")
	base := "http://" + metrics
	relaytest.WaitFor(t, time.Minute, "/readyz 200", func() bool {
		code, _ := scrape(base + "/readyz")
		return code == http.StatusOK
	})
	_, body := scrape(base + "/metrics")
	before := dbErrors(body)

	proxy.SetMode(faultproxy.Refuse)
	var code int
	relaytest.WaitFor(t, time.Minute, "/readyz not 200 and database errors counted", func() bool {
		code, body = scrape(base + "/readyz")
		_, m := scrape(base + "/metrics")
		return code != http.StatusOK && code != 0 && dbErrors(m) > before
	})
	for _, s := range []string{dbHost, proxy.Addr(), dbName, dbUser, "search_path"} {
		if strings.Contains(body, s) {
			t.Errorf("/readyz on the metrics listener says %q: %d %s", s, code, body)
		}
	}
	if code, hz := scrape(base + "/healthz"); code != http.StatusOK || hz != "ok\n" {
		t.Errorf("/healthz while the database is cut: %d %q", code, hz)
	}

	proxy.SetMode(faultproxy.Pass)
	relaytest.WaitFor(t, time.Minute, "/readyz 200 again", func() bool {
		code, _ := scrape(base + "/readyz")
		return code == http.StatusOK
	})
	p.Stop(t)
}
