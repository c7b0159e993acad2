package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

var pendingLine = regexp.MustCompile(`(?m)^pending\s+(\d+)$`)

// frames splits watch output into frames and returns each frame's pending
// count (-1 when a frame has none yet, being half written).
func frames(out string) []int {
	parts := strings.Split(out, "outbox status at ")
	var counts []int
	for _, p := range parts[1:] {
		m := pendingLine.FindStringSubmatch(p)
		if m == nil {
			counts = append(counts, -1)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		counts = append(counts, n)
	}
	return counts
}

// watch runs "outbox status --watch" with args until stop is called and
// returns its output streams and exit status.
func watch(t *testing.T, vars map[string]string, args ...string) (out *syncbuf.Buffer, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- testEnv(ctx, vars, nil, &stdout, &stderr).main(append([]string{"status", "--watch"}, args...))
	}()
	var once sync.Once
	var code int
	stop = func() (int, string) {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(30 * time.Second):
				t.Error("status --watch did not stop when its context ended")
			}
		})
		return code, stderr.String()
	}
	t.Cleanup(func() { stop() })
	return &stdout, stop
}

// TestStatusWatch: the live view redraws with the current counts until
// it is stopped, then exits 0.
func TestStatusWatch(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	run(t, vars, "enqueue", "--topic", "order.created", "--payload", "{}").ok(t)
	out, stop := watch(t, vars, "--interval", "50ms")
	waitFor(t, "a frame with 1 pending", func() bool { return slicesContain(frames(out.String()), 1) })
	run(t, vars, "enqueue", "--topic", "order.created", "--payload", "{}").ok(t)
	waitFor(t, "a frame with 2 pending", func() bool { return slicesContain(frames(out.String()), 2) })
	code, stderr := stop()
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	counts := frames(out.String())
	first2 := -1
	for i, n := range counts {
		if n == 2 && first2 < 0 {
			first2 = i
		}
		if first2 >= 0 && n != 2 && i < len(counts)-1 {
			t.Fatalf("frame %d shows %d pending after a frame showed 2: %v", i, n, counts)
		}
	}
	if counts[0] != 1 || first2 < 1 {
		t.Fatalf("pending per frame %v: want 1 first, then 2", counts)
	}
	if !strings.Contains(out.String(), "order.created  pending  2") {
		t.Errorf("the topic table of the last frames is missing:\n%s", out.String())
	}
}

// TestStatusWatchJSON: with --json each refresh is one JSON line.
func TestStatusWatchJSON(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	run(t, vars, "enqueue", "--topic", "order.created", "--payload", "{}").ok(t)
	out, stop := watch(t, vars, "--json", "--interval", "20ms")
	waitFor(t, "two JSON lines", func() bool { return strings.Count(out.String(), "\n") >= 2 })
	if code, stderr := stop(); code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for i, line := range lines {
		var st store.StatsJSON
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			t.Fatalf("line %d is not JSON: %v: %q", i, err, line)
		}
		if st.Pending != 1 || len(st.Topics) != 1 {
			t.Fatalf("line %d: %+v", i, st)
		}
	}
}

func TestStatusWatchBadInterval(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	run(t, dbVars(db), "status", "--watch", "--interval", "0s").failed(t, ExitUsage, "--interval must be positive")
}

func slicesContain(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestStatusDueAge: status reports how long the oldest due message has
// waited apart from the oldest pending message's age; a delayed message
// is pending but not due.
func TestStatusDueAge(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	delayed := enqueueOK(t, vars, "--topic", "report.daily", "--payload", "{}", "--delay", "1h")
	// Created 30 s ago: an age read in the millisecond of the insert would
	// be 0 (SQLite keeps milliseconds).
	db.Exec(t, "UPDATE outbox_messages SET created_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '-30 seconds') WHERE message_id = ?", delayed)
	if st := status(t, vars); st.Pending != 1 || st.OldestDueAgeSeconds != 0 || st.OldestPendingAgeSeconds < 29 {
		t.Errorf("a delayed message only: %+v", st)
	}
	id := enqueueOK(t, vars, "--topic", "order.created", "--payload", "{}")
	db.Exec(t, "UPDATE outbox_messages SET available_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '-90 seconds') WHERE message_id = ?", id)
	if st := status(t, vars); st.OldestDueAgeSeconds < 89 || st.OldestDueAgeSeconds > 600 {
		t.Errorf("a message due 90 s ago: %+v", st)
	}
	if out := run(t, vars, "status").ok(t).stdout; !strings.Contains(out, "oldest due message: waiting 1m3") {
		t.Errorf("status does not show the due age:\n%s", out)
	}
}

// TestStatusRoutes: the routes' health appears in the table and in the
// JSON, with since when; without any, the table has no routes section and
// the JSON an empty list.
func TestStatusRoutes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st := statusView{at: at, Routes: []store.RouteHealth{
		{Route: "orders", Relay: "r1,r2", State: store.RouteDown, For: 4*time.Minute + 12*time.Second, Reason: "HTTP 503 Service Unavailable"},
		{Route: "billing", Relay: "r1", State: store.RouteUp, For: time.Minute},
	}}
	var table strings.Builder
	printStatus(&table, st)
	for _, want := range []string{"ROUTE", "orders   down   2026-12-01T11:55:48Z  4m12s  HTTP 503 Service Unavailable", "billing  up     2026-12-01T11:59:00Z  1m0s"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js strings.Builder
	if err := printStatusJSON(&js, st, false); err != nil {
		t.Fatal(err)
	}
	var doc store.StatsJSON
	if err := json.Unmarshal([]byte(js.String()), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Routes) != 2 || doc.Routes[0].State != "down" || doc.Routes[0].Since != "2026-12-01T11:55:48Z" ||
		doc.Routes[0].ForSeconds != 252 || strings.Join(doc.Routes[0].Relays, ",") != "r1,r2" {
		t.Fatalf("routes in JSON: %+v", doc.Routes)
	}
	table.Reset()
	js.Reset()
	printStatus(&table, statusView{at: at})
	_ = printStatusJSON(&js, statusView{at: at}, false)
	if strings.Contains(table.String(), "ROUTE") || !strings.Contains(js.String(), `"routes":[]`) {
		t.Fatalf("without routes: table %q, JSON %q", table.String(), js.String())
	}
}

// TestStatusRelays: the live relays appear with their routes'
// fingerprints, and the status says whether they agree, against a real
// database's registry.
func TestStatusRelays(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	st := db.Backend().Store
	ctx := t.Context()
	for _, h := range []struct{ id, routes string }{
		{"r1", store.EncodeRoutes([]string{"order.*"})},
		{"r2", store.EncodeRoutes([]string{"order.*", "audit.>"})},
	} {
		if _, err := st.Heartbeat(ctx, h.id, h.routes, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	db.Exec(t, "INSERT INTO outbox_relays (relay_id, seen_at) VALUES ('gone', '2000-01-01 00:00:00.000')")
	view, err := readStatus(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	printStatus(&table, view)
	for _, want := range []string{"RELAY", "r1", "r2", "order.* audit.>", "the relays DIFFER"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if strings.Contains(table.String(), "gone") {
		t.Errorf("a relay not seen for years is listed:\n%s", table.String())
	}
	var js strings.Builder
	if err := printStatusJSON(&js, view, false); err != nil {
		t.Fatal(err)
	}
	var doc store.StatsJSON
	if err := json.Unmarshal([]byte(js.String()), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Relays) != 2 || doc.RoutesAgree || doc.Relays[0].RoutesFingerprint == doc.Relays[1].RoutesFingerprint {
		t.Fatalf("relays in JSON: %+v, agree %v", doc.Relays, doc.RoutesAgree)
	}
	if _, err := st.Heartbeat(ctx, "r1", store.EncodeRoutes([]string{"order.*", "audit.>"}), time.Minute); err != nil {
		t.Fatal(err)
	}
	if view, err = readStatus(ctx, st); err != nil {
		t.Fatal(err)
	}
	table.Reset()
	printStatus(&table, view)
	if !strings.Contains(table.String(), "the relays agree") {
		t.Errorf("same routes, yet:\n%s", table.String())
	}
}
