package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestMain(m *testing.M) {
	testdb.VerifyNoLeaks(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// benchRun runs the command and returns its exit status and outputs.
func benchRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// mustJSON runs a workload with --json and decodes its report.
func mustJSON(t *testing.T, args ...string) *result {
	t.Helper()
	code, out, errOut := benchRun(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("outbox bench %s: exit %d\nstderr:\n%s", strings.Join(args, " "), code, errOut)
	}
	var r result
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("report is not one JSON object: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value on stdout:\n%s", out)
	}
	return &r
}

func sqliteURL(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "bench.db")
}

// leftovers counts what a run should have removed: messages with the
// bench's topic prefix and business tables.
func leftovers(t *testing.T, url string) (msgs, tables int64) {
	t.Helper()
	ctx := context.Background()
	db, err := dburl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := db.Backend().Store.DB()
	count := func(sql string) int64 {
		rows, err := q.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		var n int64
		if rows.Next() {
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	msgs = count("SELECT count(*) FROM outbox_messages WHERE topic LIKE 'outbox-bench.%'")
	switch db.Dialect {
	case store.Postgres:
		tables = count("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'outbox_bench_orders%' AND schemaname = current_schema()")
	case store.SQLite:
		tables = count("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'outbox_bench_orders%'")
	default:
		tables = count("SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'outbox_bench_orders%' AND table_schema = DATABASE()")
	}
	return msgs, tables
}

func assertClean(t *testing.T, url string) {
	t.Helper()
	if msgs, tables := leftovers(t, url); msgs != 0 || tables != 0 {
		t.Errorf("the run left %d messages and %d business tables behind", msgs, tables)
	}
}

// workloads runs every workload with tiny sizes against url.
func workloadsAgainst(t *testing.T, url string, dialect store.Dialect) {
	t.Run("produce", func(t *testing.T) {
		r := mustJSON(t, "produce", "--db", url, "--clients", "1,2", "--duration", "300ms", "--keys", "3")
		if r.Workload != "produce" || r.Dialect != string(dialect) || r.Produce == nil {
			t.Fatalf("report: %+v", r)
		}
		if len(r.Produce.Runs) != 2 || r.Produce.Runs[0].Clients != 1 || r.Produce.Runs[1].Clients != 2 {
			t.Fatalf("runs: %+v", r.Produce.Runs)
		}
		wantVariants := []string{vBusiness, vOutbox}
		if dialect == store.Postgres {
			wantVariants = append(wantVariants, vNotify, vRowNotify, vBatch)
		} else if len(r.Produce.Skipped) != 3 {
			t.Errorf("skipped = %v, want the two notify variants and the batch", r.Produce.Skipped)
		}
		for _, run := range r.Produce.Runs {
			if len(run.Variants) != len(wantVariants) {
				t.Fatalf("%d clients: variants %+v, want %v", run.Clients, run.Variants, wantVariants)
			}
			for i, v := range run.Variants {
				if v.Variant != wantVariants[i] || v.Transactions <= 0 || v.TxPerSecond <= 0 || v.Seconds <= 0 {
					t.Errorf("%d clients: variant %+v", run.Clients, v)
				}
			}
			if run.OutboxVsBusiness <= 0 || run.Variants[0].VsBusiness != 1 {
				t.Errorf("%d clients: ratios %+v", run.Clients, run)
			}
		}
		assertClean(t, url)
	})
	t.Run("drain", func(t *testing.T) {
		r := mustJSON(t, "drain", "--db", url, "--messages", "300", "--relays", "2", "--batch-size", "100", "--sent-rows", "250", "--payload-bytes", "64")
		d := r.Drain
		if d == nil || d.Messages != 300 || d.Delivered != 300 || d.VerifiedSent != 300 {
			t.Fatalf("drain: %+v", d)
		}
		if d.Batches.Sent != 300 || d.Batches.Rounds < 3 || d.Batches.MaxRead > 100 || d.Batches.Dead != 0 {
			t.Errorf("batches: %+v", d.Batches)
		}
		if d.WallSeconds <= 0 || d.MessagesPerSecond <= 0 || d.PrefillSeconds <= 0 {
			t.Errorf("timings: %+v", d)
		}
		if r.Settings.Relays != 2 || r.Settings.BatchSize != 100 || r.Settings.SentRows != 250 || r.Settings.PayloadBytes != 64 {
			t.Errorf("settings: %+v", r.Settings)
		}
		assertClean(t, url)
	})
	t.Run("steady", func(t *testing.T) {
		plot := filepath.Join(t.TempDir(), "steady.svg")
		r := mustJSON(t, "steady", "--db", url, "--rate", "100", "--duration", "1s", "--warmup", "200ms", "--clients", "2", "--plot", plot)
		checkPlot(t, plot)
		s := r.Steady
		if s == nil || s.Count <= 0 || s.Committed <= 0 || s.AchievedRate <= 0 {
			t.Fatalf("steady: %+v", s)
		}
		if s.Count+s.Unconfirmed != s.Committed {
			t.Errorf("count %d + unconfirmed %d != committed %d", s.Count, s.Unconfirmed, s.Committed)
		}
		if s.Latency.Count != s.Count || s.CommitToConfirm.Count != s.Count {
			t.Errorf("histogram counts %d and %d, want %d", s.Latency.Count, s.CommitToConfirm.Count, s.Count)
		}
		if !(s.Latency.P50 > 0 && s.Latency.P50 <= s.Latency.P99 && s.Latency.P99 <= s.Latency.Max) {
			t.Errorf("latency percentiles out of order: %+v", s.Latency)
		}
		assertClean(t, url)
	})
	t.Run("ceiling", func(t *testing.T) {
		r := mustJSON(t, "ceiling", "--db", url, "--messages", "250", "--relays", "2", "--keys", "0", "--sent-rows", "50")
		c := r.Ceiling
		if c == nil || c.Delivered != 250 || c.VerifiedSent != 250 {
			t.Fatalf("ceiling: %+v", c)
		}
		assertClean(t, url)
	})
}

// TestWorkloads runs every workload on each database.
func TestWorkloads(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			if d == store.SQLite {
				workloadsAgainst(t, sqliteURL(t), d)
			} else {
				workloadsAgainst(t, testdb.New(t, d).URL, d)
			}
		})
	}
}

// TestInterrupted: a run cancelled mid-way (SIGINT) still leaves nothing
// behind, including transactions that were in flight when it stopped.
func TestInterrupted(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	for _, args := range [][]string{
		{"drain", "--messages", "500000"},
		{"steady", "--duration", "1m", "--rate", "300"},
		{"produce", "--clients", "32", "--duration", "1m"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		var stdout, stderr bytes.Buffer
		code := Main(ctx, append(args, "--db", db.URL), &stdout, &stderr)
		cancel()
		if code != exitFailure || !strings.Contains(stderr.String(), "outbox: bench: interrupted") {
			t.Errorf("%s: exit %d, stderr %q", args[0], code, stderr.String())
		}
		assertClean(t, db.URL)
		if n := db.Count(t, "SELECT count(*) FROM outbox_relays"); n != 0 {
			t.Errorf("%s: %d relays still registered", args[0], n)
		}
		if n := db.Count(t, "SELECT count(*) FROM outbox_leases WHERE owner IS NOT NULL"); n != 0 {
			t.Errorf("%s: %d partitions still leased", args[0], n)
		}
	}
}

func TestTableOutput(t *testing.T) {
	t.Parallel()
	url := sqliteURL(t)
	code, out, errOut := benchRun(t, "drain", "--db", url, "--messages", "50")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"outbox bench drain", "database", url, "destination", "null://", "settings", "50 messages", "throughput", "msg/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestStdoutDestination: the messages take stdout, so the report moves to
// stderr.
func TestStdoutDestination(t *testing.T) {
	t.Parallel()
	url := sqliteURL(t)
	code, out, errOut := benchRun(t, "drain", "--db", url, "--messages", "40", "--to", "stdout://", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			MessageID string `json:"message_id"`
			Topic     string `json:"topic"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.MessageID == "" || !strings.HasPrefix(m.Topic, "outbox-bench.") {
			t.Fatalf("stdout line %q: %v", sc.Text(), err)
		}
		lines++
	}
	if lines != 40 {
		t.Errorf("%d lines on stdout, want 40", lines)
	}
	i := strings.Index(errOut, "{\n")
	if i < 0 {
		t.Fatalf("no report on stderr:\n%s", errOut)
	}
	var r result
	if err := json.NewDecoder(strings.NewReader(errOut[i:])).Decode(&r); err != nil || r.Drain == nil || r.Drain.Delivered != 40 {
		t.Fatalf("report on stderr: %v %+v", err, r.Drain)
	}
}

func TestSink(t *testing.T) {
	t.Parallel()
	r := mustJSON(t, "drain", "--db", sqliteURL(t), "--messages", "60", "--sink")
	if r.Drain.Delivered != 60 || r.Drain.SinkRequests != 60 || !strings.HasPrefix(r.Destination, "http://127.0.0.1:") {
		t.Fatalf("sink drain: destination %q, %+v", r.Destination, r.Drain)
	}
}

// TestRefusesBusyDatabase: the bench's relays must not take other
// messages, so it refuses to start them while any are pending, and leaves
// them alone.
func TestRefusesBusyDatabase(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	db.Exec(t, "INSERT INTO outbox_messages (topic, payload) VALUES ('order.created', '{}')")
	code, _, errOut := benchRun(t, "drain", "--db", db.URL, "--messages", "10")
	if code != 1 || !strings.Contains(errOut, "1 pending messages on this database are not the bench's") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND topic = 'order.created' AND attempts = 0"); n != 1 {
		t.Errorf("the other message was touched")
	}
	db.Exec(t, "INSERT INTO outbox_relays (relay_id, seen_at) VALUES ('prod-relay-1', strftime('%Y-%m-%d %H:%M:%f', 'now'))")
	code, _, errOut = benchRun(t, "produce", "--db", db.URL, "--clients", "1", "--duration", "100ms")
	if code != 1 || !strings.Contains(errOut, "prod-relay-1") {
		t.Fatalf("produce beside a live relay: exit %d, stderr %q", code, errOut)
	}
	assertClean(t, db.URL)
}

func TestUsage(t *testing.T) {
	t.Setenv("OUTBOX_DATABASE_URL", "")
	db := "sqlite://" + filepath.Join(t.TempDir(), "never.db")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no workload", nil, "name a workload"},
		{"unknown workload", []string{"fast", "--db", db}, `unknown workload "fast"`},
		{"flag first", []string{"--db", db, "drain"}, "name the workload before the flags"},
		{"unknown flag", []string{"drain", "--db", db, "--rate", "5"}, "unknown flag --rate"},
		{"zero rate", []string{"steady", "--db", db, "--rate", "0"}, "--rate must be above 0"},
		{"negative rate", []string{"steady", "--db", db, "--rate", "-5"}, "--rate must be above 0"},
		{"bad clients", []string{"produce", "--db", db, "--clients", "1,x"}, "--clients"},
		{"negative claim threshold", []string{"produce", "--db", db, "--claim-threshold", "-1"}, "--claim-threshold must not be negative"},
		{"unknown variant", []string{"produce", "--db", db, "--variants", "business,outbox+zip"}, `no variant "outbox+zip"`},
		{"steady with client list", []string{"steady", "--db", db, "--clients", "1,2"}, "--clients takes one number"},
		{"zero messages", []string{"drain", "--db", db, "--messages", "0"}, "--messages"},
		{"zero relays", []string{"drain", "--db", db, "--relays", "0"}, "--relays"},
		{"unknown read path", []string{"drain", "--db", db, "--read-path", "cdc"}, `--read-path must be table or snapshot, not "cdc"`},
		{"snapshot read path on SQLite", []string{"drain", "--db", db, "--read-path", "snapshot"}, "--read-path snapshot needs PostgreSQL"},
		{"tiny payload", []string{"drain", "--db", db, "--payload-bytes", "1"}, "--payload-bytes"},
		{"no database", []string{"drain"}, "no database"},
		{"bad database URL", []string{"drain", "--db", "oracle://x"}, "bad database URL"},
		{"unsupported destination", []string{"drain", "--db", db, "--to", "ftp://files.example.com/drop"}, `unknown scheme "ftp"`},
		{"unknown destination", []string{"drain", "--db", db, "--to", "ftp://host/x"}, "--to"},
		{"destination without scheme", []string{"steady", "--db", db, "--to", "localhost:8080"}, "--to"},
		{"sink and to", []string{"drain", "--db", db, "--sink", "--to", "stdout://"}, "--sink"},
		{"positional", []string{"drain", "--db", db, "extra"}, `unexpected argument "extra"`},
		{"publish to an unknown destination", []string{"publish", "--to", "ftp://files.example.com/drop"}, `--to: destination ftp://files.example.com/drop: unknown scheme "ftp"`},
		{"publish to no scheme", []string{"publish", "--to", "localhost:4222"}, "--to"},
		{"publish with a database", []string{"publish", "--db", db}, "unknown flag --db"},
		{"publish zero messages", []string{"publish", "--messages", "0"}, "--messages must be at least 1"},
		{"publish negative workers", []string{"publish", "--workers", "-1"}, "--workers"},
		{"publish with relays", []string{"publish", "--relays", "2"}, "unknown flag --relays"},
		{"fleet of no relay", []string{"fleet", "--db", "postgres://h/db", "--relays", "0"}, "--relays of at least 1"},
		{"fleet on SQLite", []string{"fleet", "--db", db}, "--db must be a PostgreSQL URL"},
		{"fleet without rate", []string{"fleet", "--db", "postgres://h/db", "--rate", "0"}, "--rate, --duration and --idle must be above 0"},
		{"fleet positional", []string{"fleet", "--db", "postgres://h/db", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := benchRun(t, tc.args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want 2; stderr %q", code, errOut)
			}
			if out != "" || !strings.HasPrefix(errOut, "outbox: ") || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("stdout %q, stderr %q: want one line with %q", out, errOut, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"drain", "--help"}, {"steady", "-h"}, {"publish", "--help"}, {"fleet", "--help"}} {
		code, out, errOut := benchRun(t, args...)
		if code != 0 || !strings.HasPrefix(out, "Usage: outbox bench") || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	_, out, _ := benchRun(t, "steady", "--help")
	for _, flag := range []string{"--rate", "--duration", "--warmup", "--clients", "--to", "--sink", "--relays", "--json"} {
		if !strings.Contains(out, flag) {
			t.Errorf("steady --help lacks %s", flag)
		}
	}
	_, out, _ = benchRun(t, "--help")
	if !strings.Contains(out, "\n  publish  ") {
		t.Errorf("--help does not list publish:\n%s", out)
	}
	_, out, _ = benchRun(t, "publish", "--help")
	for _, flag := range []string{"--to", "--messages", "--workers", "--batch-size", "--payload-bytes", "--keys", "--json"} {
		if !strings.Contains(out, flag) {
			t.Errorf("publish --help lacks %s", flag)
		}
	}
	if strings.Contains(out, "--db") || strings.Contains(out, "--relays") {
		t.Errorf("publish --help offers a database or relays:\n%s", out)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	code, _, errOut := benchRun(t, "drain", "--db", "postgres://app:s3cretpw@127.0.0.1:1/db?connect_timeout=1")
	if code != exitFailure {
		t.Errorf("exit %d, want 1 (connection refused)", code)
	}
	if strings.Contains(errOut, "s3cretpw") || !strings.HasPrefix(errOut, "outbox: bench: ") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestMakePayload(t *testing.T) {
	for _, n := range []int{2, 3, 7, 8, 9, 100, 180, 500, 4096} {
		p := makePayload(n)
		if len(p) != n || !json.Valid(p) {
			t.Errorf("makePayload(%d) = %d bytes, valid %v: %s", n, len(p), json.Valid(p), p)
		}
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 100000: "100,000"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}

// checkPlot parses the SVG that steady --plot drew: two latency curves
// through every plotted percentile, rising, and a backlog series.
func checkPlot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var doc struct {
		Polylines []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
	}
	if err := xml.NewDecoder(f).Decode(&doc); err != nil {
		t.Fatalf("--plot wrote no valid SVG: %v", err)
	}
	if len(doc.Polylines) != 3 {
		t.Fatalf("%d curves, want 2 latency curves and the backlog", len(doc.Polylines))
	}
	for i, pl := range doc.Polylines[:2] {
		pts := strings.Fields(pl.Points)
		if len(pts) != len(plotQuantiles) {
			t.Fatalf("latency curve %d has %d points, want %d", i, len(pts), len(plotQuantiles))
		}
		lastY := math.Inf(1)
		for _, p := range pts {
			var x, y float64
			if _, err := fmt.Sscanf(p, "%f,%f", &x, &y); err != nil {
				t.Fatalf("point %q: %v", p, err)
			}
			if y > lastY { // SVG y grows downwards: latency may only rise
				t.Fatalf("latency curve %d falls at %q", i, p)
			}
			lastY = y
		}
	}
	if len(strings.Fields(doc.Polylines[2].Points)) == 0 {
		t.Error("the backlog series is empty")
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.2: 2, 3: 5, 7: 10, 11: 20, 420: 500} {
		if got := niceCeil(in); math.Abs(got-want) > 1e-9 {
			t.Errorf("niceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}

// TestBrokerDestinations drains to each local broker: the bench creates
// the stream, queue or streams its messages need and removes them after.
// brokerLeftovers lists the bench's JetStream streams and Redis streams
// on the local brokers.
func brokerLeftovers(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), "outbox-bench.*").Result()
	if err != nil {
		testdb.Unavailable(t, "Redis", err)
	}
	for _, k := range keys {
		out["redis "+k] = true
	}
	for name := range benchStreams(t) {
		out["stream "+name] = true
	}
	return out
}

// benchStreams lists the bench's JetStream streams on the local NATS
// server.
func benchStreams(t *testing.T) map[string]bool {
	t.Helper()
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		testdb.Unavailable(t, "NATS", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	out := map[string]bool{}
	names := js.StreamNames(context.Background())
	for name := range names.Name() {
		if strings.HasPrefix(name, "OUTBOX_BENCH_") {
			out[name] = true
		}
	}
	return out
}

// localBrokers are the brokers the destination tests publish to.
var localBrokers = []struct{ name, to, addr string }{
	{"nats", "nats://127.0.0.1:4222", "127.0.0.1:4222"},
	{"rabbitmq", "amqp://guest:guest@127.0.0.1:5672/", "127.0.0.1:5672"},
	{"redis", "redis://127.0.0.1:6379/0", "127.0.0.1:6379"},
}

func reachable(t *testing.T, name, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		testdb.Unavailable(t, name, err)
		return
	}
	_ = conn.Close()
}

func TestBrokerDestinations(t *testing.T) {
	// What earlier, interrupted runs may have left on the brokers is not
	// this test's: compare with what is there before.
	before := brokerLeftovers(t)
	db := testdb.New(t, store.Postgres)
	for _, c := range localBrokers {
		t.Run(c.name, func(t *testing.T) {
			reachable(t, c.name, c.addr)
			drainTo(t, db.URL, c.to)
		})
	}
	for what := range brokerLeftovers(t) {
		if !before[what] {
			t.Errorf("left behind: %s", what)
		}
	}
}

// drainTo drains 500 messages over 20 keys from dbURL to the destination
// and checks every one was confirmed and recorded sent.
func drainTo(t *testing.T, dbURL, to string) {
	t.Helper()
	r := mustJSON(t, "drain", "--db", dbURL, "--to", to, "--messages", "500", "--keys", "20")
	if d := r.Drain; d == nil || d.Delivered != 500 || d.VerifiedSent != 500 || d.Batches.Dead != 0 {
		t.Fatalf("drain to %s: %+v", to, r.Drain)
	}
	assertClean(t, dbURL)
}

// TestKafkaAndMQTTDestinations drains to an in-process Kafka (kfake, the
// real protocol over TCP, creating no topic by itself: the bench creates
// the run's) and to the local MQTT broker through the same URLs
// `outbox relay --to` takes.
func TestKafkaAndMQTTDestinations(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	db := testdb.New(t, store.Postgres)
	for _, d := range []struct{ name, to, addr string }{
		{"kafka", "kafka://" + c.ListenAddrs()[0], c.ListenAddrs()[0]},
		{"mqtt", "mqtt://127.0.0.1:1883", "127.0.0.1:1883"},
	} {
		t.Run(d.name, func(t *testing.T) {
			reachable(t, d.name, d.addr)
			drainTo(t, db.URL, d.to)
			if d.name != "kafka" {
				return
			}
			// The run's topics, created for it, are gone again.
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			topics, err := kadm.NewClient(cl).ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range topics.Names() {
				if strings.HasPrefix(name, "outbox-bench.") {
					t.Errorf("left behind: Kafka topic %s", name)
				}
			}
		})
	}
}

// TestSteadyConsume: with --consume, a consumer on the run's JetStream
// stream receives every confirmed message, and each latency to receipt
// is measured from the same sends as the latency to confirmation.
func TestSteadyConsume(t *testing.T) {
	reachable(t, "NATS", "127.0.0.1:4222")
	db := testdb.New(t, store.Postgres)
	r := mustJSON(t, "steady", "--db", db.URL, "--to", "nats://127.0.0.1:4222", "--consume", "--rate", "200", "--duration", "1s", "--warmup", "200ms", "--clients", "2")
	s := r.Steady
	if s == nil || s.Count <= 0 || s.LatencyToReceipt == nil || s.CommitToReceipt == nil {
		t.Fatalf("steady --consume: %+v", s)
	}
	if s.LatencyToReceipt.Count != s.Count || s.CommitToReceipt.Count != s.Count {
		t.Errorf("received %d (commit→receipt %d) of %d confirmed", s.LatencyToReceipt.Count, s.CommitToReceipt.Count, s.Count)
	}
	// A message is received after its send was due.
	if s.LatencyToReceipt.Max <= 0 || s.LatencyToReceipt.P50 > s.LatencyToReceipt.Max {
		t.Errorf("latency to receipt: %+v", s.LatencyToReceipt)
	}
	assertClean(t, db.URL)
	// Without a broker to consume from, the flag is refused.
	if code, _, errOut := benchRun(t, "steady", "--db", db.URL, "--consume", "--duration", "1s"); code == 0 || !strings.Contains(errOut, "--consume needs a nats:// destination") {
		t.Errorf("--consume with the null destination: exit %d, stderr %q", code, errOut)
	}
}

// TestPublishNull: the publish workload needs no database; against the
// null destination it confirms every message, in rounds of --batch-size
// split into Publish calls that hold at most one message per business
// key, each worker over its own share of the keys.
func TestPublishNull(t *testing.T) {
	t.Parallel()
	r := mustJSON(t, "publish", "--messages", "3000", "--workers", "3", "--batch-size", "100", "--keys", "50", "--payload-bytes", "300")
	p := r.Publish
	if r.Workload != "publish" || r.Database != "" || r.Dialect != "" || !strings.HasPrefix(r.Destination, "null://") || p == nil {
		t.Fatalf("report: %+v", r)
	}
	if p.Messages != 3000 || p.Confirmed != 3000 || p.Failed != 0 {
		t.Fatalf("publish: %+v", p)
	}
	if r.Settings.Workers != 3 || r.Settings.BatchSize != 100 || r.Settings.Messages != 3000 || r.Settings.Keys != 50 || r.Settings.PayloadBytes != 300 || r.Settings.Relays != 0 {
		t.Errorf("settings: %+v", r.Settings)
	}
	// 50 keys over 3 workers: 17, 17 and 16 keys, so a round of 100 goes
	// out in calls of at most 17.
	bs := p.Batches
	if bs.BatchSize != 100 || bs.Rounds < 30 || bs.MaxCall < 16 || bs.MaxCall > 17 || bs.Calls < 3000/17 {
		t.Errorf("batches: %+v", bs)
	}
	if math.Abs(bs.MeanCall*float64(bs.Calls)-3000) > 0.5 {
		t.Errorf("mean call %.2f × %d calls is not 3000 messages", bs.MeanCall, bs.Calls)
	}
	if p.WallSeconds <= 0 || p.MessagesPerSecond <= 0 || p.CPUSeconds <= 0 || p.CPUSecondsPer10k <= 0 || p.PeakRSSBytes <= 0 {
		t.Errorf("figures: %+v", p)
	}
	if p.HeldAtDestination != nil {
		t.Errorf("null:// cannot count what it holds, yet the report says %d", *p.HeldAtDestination)
	}

	// The defaults are the relay's; with no keys a round is one call.
	r = mustJSON(t, "publish", "--messages", "2500", "--keys", "0")
	if r.Settings.Workers != outbox.DefaultWorkers || r.Settings.BatchSize != outbox.DefaultBatchSize || r.Publish.Confirmed != 2500 {
		t.Fatalf("defaults: settings %+v, publish %+v", r.Settings, r.Publish)
	}
	if bs := r.Publish.Batches; bs.Calls != bs.Rounds || bs.MaxCall != 625 {
		t.Errorf("no keys: batches %+v, want one call per round of 2500/4", bs)
	}

	code, out, errOut := benchRun(t, "publish", "--messages", "500")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"outbox bench publish", "destination", "null://", "500 messages", "4 workers", "confirmed", "500 of 500 messages, 0 failed", "msg/s", "per 10k messages", "Publish calls"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "database") {
		t.Errorf("the table names a database:\n%s", out)
	}
}

// TestPublishBrokers publishes to each local broker with no database:
// the bench creates the stream, queue or streams, every message is
// confirmed and found there, and they are removed after.
func TestPublishBrokers(t *testing.T) {
	before := brokerLeftovers(t)
	for _, c := range localBrokers {
		t.Run(c.name, func(t *testing.T) {
			reachable(t, c.name, c.addr)
			r := mustJSON(t, "publish", "--to", c.to, "--messages", "2000", "--workers", "2", "--batch-size", "300", "--keys", "40")
			p := r.Publish
			if p == nil || p.Confirmed != 2000 || p.Failed != 0 {
				t.Fatalf("publish to %s: %+v", c.to, p)
			}
			if p.HeldAtDestination == nil || *p.HeldAtDestination != 2000 {
				t.Errorf("the destination holds %v messages after the run, want 2000", p.HeldAtDestination)
			}
			if p.Batches.MaxCall != 20 || p.Batches.Rounds != 8 {
				t.Errorf("batches: %+v, want rounds of 300 in calls of 20 (40 keys over 2 workers)", p.Batches)
			}
		})
	}
	for what := range brokerLeftovers(t) {
		if !before[what] {
			t.Errorf("left behind: %s", what)
		}
	}
}

// TestPublishFailure: a destination that refuses messages fails the run
// with one line that counts the failures and quotes the first.
func TestPublishFailure(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "no room", http.StatusInsufficientStorage)
	}))
	defer srv.Close()
	code, out, errOut := benchRun(t, "publish", "--to", srv.URL+"/hook", "--messages", "1000", "--workers", "1", "--batch-size", "10", "--keys", "0")
	if code != exitFailure {
		t.Fatalf("exit %d, want 1; stderr %q", code, errOut)
	}
	last := errOut[strings.LastIndex(strings.TrimSuffix(errOut, "\n"), "\n")+1:]
	if out != "" || !strings.HasPrefix(last, "outbox: bench: publish: 10 messages failed, the first: ") || !strings.Contains(last, "507") ||
		!strings.HasSuffix(last, "(0 of 1,000 confirmed before the run stopped)\n") {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
}

// TestPublishInterrupted: an interrupted publish run still removes its
// stream.
func TestPublishInterrupted(t *testing.T) {
	reachable(t, "NATS", "127.0.0.1:4222")
	before := brokerLeftovers(t)
	// Interrupted once it reports progress, however long getting there
	// takes on a loaded machine; the timeout only ends a run that never
	// publishes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	stderr := &cancelOnWrite{match: "/50,000,000 confirmed", cancel: cancel}
	code := Main(ctx, []string{"publish", "--to", "nats://127.0.0.1:4222", "--messages", "50000000"}, &stdout, stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "outbox: bench: interrupted") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "/50,000,000 confirmed") {
		t.Errorf("interrupted before it published (no progress line): %q", stderr.String())
	}
	for what := range brokerLeftovers(t) {
		if !before[what] {
			t.Errorf("left behind: %s", what)
		}
	}
}

// cancelOnWrite collects what is written to it and calls cancel once a
// write contains match. It is safe for concurrent writers.
type cancelOnWrite struct {
	match  string
	cancel context.CancelFunc

	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(w.match)) {
		w.cancel()
	}
	return w.buf.Write(p)
}

func (w *cancelOnWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestDrainSnapshot: drain --read-path snapshot delivers every message of
// the backlog through relays reading by snapshots, which leave every row
// sent by their cursors, in a database of its own that it drops after:
// the table --db names gets no column, and no scratch database stays on
// the server.
func TestDrainSnapshot(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	for _, to := range []string{"null://", "nats://127.0.0.1:4222"} {
		t.Run(to, func(t *testing.T) {
			if strings.HasPrefix(to, "nats:") {
				reachable(t, "NATS", "127.0.0.1:4222")
			}
			r := mustJSON(t, "drain", "--db", db.URL, "--to", to, "--messages", "1500", "--keys", "20",
				"--batch-size", "400", "--read-path", "snapshot")
			d := r.Drain
			if d == nil || d.ReadPath != readPathSnapshot || d.Delivered < 1500 || d.VerifiedSent != 1500 {
				t.Fatalf("drain: %+v", d)
			}
			// 1,500 rows in batches of at most 400.
			if d.Batches.Rounds < 4 {
				t.Errorf("%d rounds for 1,500 messages in batches of 400", d.Batches.Rounds)
			}
		})
	}
	ctx := context.Background()
	conn, err := dburl.Open(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var cols, scratch int
	if err := conn.Pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'outbox_messages' AND column_name = 'outbox_txid'`).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if err := conn.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE 'bench_snapshot_%'`).Scan(&scratch); err != nil {
		t.Fatal(err)
	}
	if cols != 0 || scratch != 0 {
		t.Errorf("left behind: %d transaction id columns in --db's table, %d scratch databases", cols, scratch)
	}
	assertClean(t, db.URL)
}

// TestSteadySnapshot: steady --read-path snapshot confirms every message
// committed through relays reading by snapshots, measures its latency,
// and leaves nothing behind.
func TestSteadySnapshot(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	r := mustJSON(t, "steady", "--db", db.URL, "--to", "null://", "--rate", "300", "--duration", "1s", "--warmup", "200ms",
		"--keys", "10", "--read-path", "snapshot")
	s := r.Steady
	if s == nil || s.Committed == 0 || s.Count != s.Committed || s.Unconfirmed != 0 || s.Batches.Rounds == 0 {
		t.Fatalf("steady: %+v", s)
	}
	if s.CommitToConfirm.P99 <= 0 {
		t.Errorf("no commit → confirm latency: %+v", s.CommitToConfirm)
	}
	assertClean(t, db.URL)
}
