package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
)

// metricValues gathers reg into "name{k=v,…}" → value; histograms give
// name_count and name_sum.
func metricValues(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			ls := "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[mf.GetName()+ls] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[mf.GetName()+ls] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"+ls] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+ls] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func TestRelayMetricsAfterKnownSequence(t *testing.T) {
	harness.EachDriver(t, func(t *testing.T, h *harness.Harness) {
		ctx := context.Background()
		pub := outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
			switch env.Topic {
			case "m.flaky":
				if env.Attempt <= 2 {
					return errors.New("flaky")
				}
			case "m.bad":
				return publisher.Permanent(errors.New("rejected"))
			}
			return nil
		})
		reg := prometheus.NewRegistry()
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: pub, Name: "all"})
		cfg.Metrics = reg
		cfg.MetricsInterval = 50 * time.Millisecond
		r := newRelay(t, h, cfg)
		in := append(msgs(5, "m.ok", nil), outbox.Message{Topic: "m.flaky", Payload: []byte(`{}`)},
			outbox.Message{Topic: "m.bad", Payload: []byte(`{}`)},
			outbox.Message{Topic: "m.later", Payload: []byte(`{}`), Delay: time.Hour})
		enqueue(t, h, ctx, in)
		partitions, err := h.DB.Store().Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stop := relaytest.Run(t, r)
		relaytest.WaitFor(t, 30*time.Second, "6 sent and 1 dead", func() bool {
			s, err := h.DB.Store().Stats(ctx)
			return err == nil && s.Sent == 6 && s.Dead == 1
		})
		// The gauges follow the table at the next samples: the delayed
		// message waits, pending but not due, so it is no backlog.
		relaytest.WaitFor(t, 10*time.Second, "gauges sampled", func() bool {
			v := metricValues(t, reg)
			due, sampled := v["outbox_oldest_due_age_seconds{}"]
			return v["outbox_pending_messages{}"] == 1 && v["outbox_dead_messages{}"] == 1 &&
				v["outbox_oldest_pending_age_seconds{}"] > 0 && sampled && due == 0 &&
				v["outbox_owned_partitions{}"] == float64(partitions)
		})
		stop()

		v := metricValues(t, reg)
		want := map[string]float64{
			"outbox_published_total{result=sent,route=all,topic=m.ok}":     5,
			"outbox_published_total{result=retry,route=all,topic=m.flaky}": 2,
			"outbox_published_total{result=sent,route=all,topic=m.flaky}":  1,
			"outbox_published_total{result=dead,route=all,topic=m.bad}":    1,
			"outbox_dead_total{route=all,topic=m.bad}":                     1,
			"outbox_delivery_latency_seconds_count{}":                      6,
			"outbox_circuit_open{route=all}":                               0,
			"outbox_owned_partitions{}":                                    0,
		}
		for k, w := range want {
			if got, ok := v[k]; !ok || got != w {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, w)
			}
		}
		var outcomes float64
		for k, got := range v {
			if !strings.HasPrefix(k, "outbox_published_total{") {
				continue
			}
			outcomes += got
			// A failure while another call of the route is in flight
			// and none has succeeded since it left is put back once,
			// uncharged, as the route's rather than the message's
			// (route health): with several workers, m.flaky's and
			// m.bad's first failures may each be deferred once.
			if strings.Contains(k, "result=deferred") {
				continue
			}
			if _, ok := want[k]; !ok && got != 0 {
				t.Errorf("unexpected %s = %v", k, got)
			}
		}
		// Every message read is one outcome.
		if got := v["outbox_batch_size_sum{}"]; got != outcomes {
			t.Errorf("batch sizes add up to %v, outcomes to %v", got, outcomes)
		}
		for _, k := range []string{"outbox_read_duration_seconds_count{}", "outbox_settle_duration_seconds_count{}", "outbox_publish_duration_seconds_count{route=all}"} {
			if v[k] < 1 {
				t.Errorf("%s = %v, want at least 1", k, v[k])
			}
		}
		if v["outbox_delivery_latency_seconds_sum{}"] <= 0 {
			t.Errorf("latency sum %v", v["outbox_delivery_latency_seconds_sum{}"])
		}
	})
}

func TestRelayMetricsSharedRegistry(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	reg := prometheus.NewRegistry()
	var got atomic.Int64
	pub := outbox.PublisherFunc(func(context.Context, *outbox.Envelope) error { got.Add(1); return nil })
	var stops []func()
	for range 2 {
		cfg := relaytest.Config(pub)
		cfg.Metrics = reg
		r, err := outbox.NewRelay(db.PGX, cfg)
		if err != nil {
			t.Fatalf("second relay on one registry: %v", err)
		}
		stops = append(stops, relaytest.Run(t, r))
	}
	partitions, err := db.Store().Partitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relaytest.NewEnqueuer(t, db).Enqueue(context.Background(), relaytest.Messages("s.x", 0, 20, 20)); err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 30*time.Second, "20 sent", func() bool { return relaytest.Count(t, db, "sent") == 20 })
	// Both relays' shares add up to all partitions once they have settled.
	relaytest.WaitFor(t, 30*time.Second, "partitions shared", func() bool {
		return metricValues(t, reg)["outbox_owned_partitions{}"] == float64(partitions)
	})
	for _, stop := range stops {
		stop()
	}
	v := metricValues(t, reg)
	if v["outbox_published_total{result=sent,route=*,topic=s.x}"] != float64(got.Load()) || v["outbox_owned_partitions{}"] != 0 {
		t.Fatalf("sent %v (published %d), owned %v", v["outbox_published_total{result=sent,route=*,topic=s.x}"], got.Load(), v["outbox_owned_partitions{}"])
	}

	// A foreign collector under one of the names is an error, not a panic.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_pending_messages", Help: "not ours"}))
	cfg := relaytest.Config(pub)
	cfg.Metrics = other
	_, err = outbox.NewRelay(db.PGX, cfg)
	if err == nil || !strings.Contains(err.Error(), "RelayConfig.Metrics") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("conflicting registration: %v", err)
	}
}

// logCapture keeps every record logged.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	return nil
}
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

func (c *logCapture) records() []slog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.recs)
}

// find returns the attributes of the records with message msg at level.
func (c *logCapture) find(level slog.Level, msg string) []map[string]string {
	var out []map[string]string
	for _, r := range c.records() {
		if r.Level == level && r.Message == msg {
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			out = append(out, attrs)
		}
	}
	return out
}

// findPrefix is find for the records whose message starts with prefix;
// the message is under "msg".
func (c *logCapture) findPrefix(level slog.Level, prefix string) []map[string]string {
	var out []map[string]string
	for _, r := range c.records() {
		if r.Level == level && strings.HasPrefix(r.Message, prefix) {
			attrs := map[string]string{"msg": r.Message}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			out = append(out, attrs)
		}
	}
	return out
}

func (c *logCapture) text() string {
	var b bytes.Buffer
	h := slog.NewTextHandler(&b, nil)
	for _, r := range c.records() {
		_ = h.Handle(context.Background(), r)
	}
	return b.String()
}

func TestRelayLogsStateChangesWithoutSecrets(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	var down atomic.Bool
	down.Store(true)
	downPub := outbox.PublisherFunc(func(context.Context, *outbox.Envelope) error {
		if down.Load() {
			return publisher.Unavailable(errors.New(`dial "amqp://guest:hunter2@broker:5672/": connection refused`))
		}
		return nil
	})
	restPub := refusing("l.dead", publisher.Permanent(errors.New(`Post "https://user:s3cret@hooks.example.com/x?token=t0ken": 400 Bad Request`)))
	logs := &logCapture{}
	reg := prometheus.NewRegistry()
	cfg := relaytest.Config(nil)
	cfg.Routes = []outbox.Route{{Pattern: "l.down", Publisher: downPub, Name: "down"}, {Pattern: "*", Publisher: restPub, Name: "rest"}}
	cfg.Logger = slog.New(logs)
	cfg.Metrics = reg
	stop := relaytest.Start(t, db, cfg)
	e := relaytest.NewEnqueuer(t, db)
	ids, err := e.Enqueue(context.Background(), append(relaytest.Messages("l.ok", 0, 20, 20),
		outbox.Message{Topic: "l.dead", Payload: []byte(`{}`)}, outbox.Message{Topic: "l.down", Payload: []byte(`{}`)}))
	if err != nil {
		t.Fatal(err)
	}
	circuit := func() float64 { return metricValues(t, reg)["outbox_circuit_open{route=down}"] }
	relaytest.WaitFor(t, 30*time.Second, "circuit open", func() bool { return circuit() == 1 })
	down.Store(false)
	relaytest.WaitFor(t, 30*time.Second, "circuit closed", func() bool { return circuit() == 0 })
	relaytest.WaitFor(t, 30*time.Second, "21 sent", func() bool { return relaytest.Count(t, db, "sent") == 21 })
	stop()

	dead := logs.find(slog.LevelWarn, "outbox relay: message dead")
	if len(dead) != 1 {
		t.Fatalf("%d dead lines, want 1", len(dead))
	}
	d := dead[0]
	if d["topic"] != "l.dead" || d["message_id"] != ids[20] || d["attempts"] != "1" || d["route"] != "rest" ||
		!strings.Contains(d["error"], "https://user:xxxxx@hooks.example.com/x?token=xxxxx") {
		t.Errorf("dead line %v", d)
	}
	downLines := logs.findPrefix(slog.LevelWarn, "outbox relay: route down: ")
	upLines := logs.findPrefix(slog.LevelInfo, "outbox relay: route up again after ")
	if len(downLines) != 1 || len(upLines) != 1 || downLines[0]["route"] != "down" || upLines[0]["route"] != "down" ||
		!strings.Contains(downLines[0]["msg"], "amqp://guest:xxxxx@broker:5672/") || !strings.Contains(upLines[0]["msg"], "1 probe") {
		t.Errorf("down %v, up %v; want one each for route down, the reason redacted", downLines, upLines)
	}
	gained := 0
	for _, p := range logs.find(slog.LevelInfo, "outbox relay: partitions changed") {
		var n int
		_, _ = fmt.Sscan(p["gained"], &n)
		gained += n
	}
	if gained == 0 {
		t.Error("no partitions changed line counting gained partitions")
	}
	for _, r := range logs.records() {
		if r.Level >= slog.LevelInfo && r.Level < slog.LevelWarn {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "message_id" {
					t.Errorf("info line about one message: %q", r.Message)
				}
				return true
			})
		}
	}
	text := logs.text()
	for _, secret := range []string{"s3cret", "t0ken", "hunter2"} {
		if strings.Contains(text, secret) {
			t.Errorf("logs contain %q:\n%s", secret, text)
		}
	}
	// The stored last_error is redacted too.
	ms, err := db.Store().List(context.Background(), store.Filter{MessageIDs: []string{ids[20]}})
	if err != nil || len(ms) != 1 || strings.Contains(ms[0].LastError, "s3cret") || !strings.Contains(ms[0].LastError, "400 Bad Request") {
		t.Errorf("stored last_error: %v %+v", err, ms)
	}
}

func TestRelayTracePropagation(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	consumed := make(chan *inbox.Message, 2)
	pub := outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
		// The consumer's side: decode the wire headers into an inbox
		// message and continue its trace.
		headers := make(map[string]string, len(env.Headers))
		for k, v := range env.Headers {
			headers[k] = v
		}
		m := &inbox.Message{ID: env.ID, Topic: env.Topic, Headers: headers, Payload: env.Payload}
		_, span := tp.Tracer("consumer").Start(m.Context(context.Background()), "consume", trace.WithSpanKind(trace.SpanKindConsumer))
		span.End()
		consumed <- m
		return nil
	})
	cfg := relaytest.Config(pub)
	cfg.TracerProvider = tp
	relaytest.Start(t, db, cfg)

	ctx, producer := tp.Tracer("app").Start(context.Background(), "place order")
	ids, err := relaytest.NewEnqueuer(t, db).Enqueue(ctx, []outbox.Message{{Topic: "order.created", Payload: []byte(`{}`)}})
	producer.End()
	if err != nil {
		t.Fatal(err)
	}
	var m *inbox.Message
	select {
	case m = <-consumed:
	case <-time.After(30 * time.Second):
		t.Fatal("not delivered")
	}
	relaytest.WaitFor(t, 10*time.Second, "three spans", func() bool { return len(exp.GetSpans()) >= 3 })
	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	p, send, cons := byName["place order"], byName["send order.created"], byName["consume"]
	tid := p.SpanContext.TraceID()
	if !tid.IsValid() || send.SpanContext.TraceID() != tid || cons.SpanContext.TraceID() != tid {
		t.Fatalf("trace ids: producer %v, send %v, consume %v", tid, send.SpanContext.TraceID(), cons.SpanContext.TraceID())
	}
	if send.Parent.SpanID() != p.SpanContext.SpanID() || !send.Parent.IsRemote() {
		t.Errorf("send's parent %v, want the producer span %v (remote)", send.Parent.SpanID(), p.SpanContext.SpanID())
	}
	if cons.Parent.SpanID() != send.SpanContext.SpanID() {
		t.Errorf("consume's parent %v, want the send span %v", cons.Parent.SpanID(), send.SpanContext.SpanID())
	}
	if send.SpanKind != trace.SpanKindProducer {
		t.Errorf("send span kind %v", send.SpanKind)
	}
	attrs := map[string]string{}
	for _, a := range send.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["messaging.message.id"] != ids[0] || attrs["messaging.destination.name"] != "order.created" || attrs["outbox.attempt"] != "1" {
		t.Errorf("send attributes %v", attrs)
	}
	if !strings.Contains(m.Headers[publisher.HeaderTraceParent], send.SpanContext.SpanID().String()) {
		t.Errorf("wire traceparent %q does not name the send span", m.Headers[publisher.HeaderTraceParent])
	}
}

func TestRelayTraceUnchangedWithoutRecording(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	got := make(chan string, 1)
	pub := outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
		got <- env.Headers[publisher.HeaderTraceParent]
		return nil
	})
	cfg := relaytest.Config(pub)
	cfg.TracerProvider = noop.NewTracerProvider()
	relaytest.Start(t, db, cfg)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, headers) VALUES ('t.x', '{}', '{"traceparent":"`+tp+`"}')`)
	select {
	case h := <-got:
		if h != tp {
			t.Fatalf("traceparent %q, want the producer's %q", h, tp)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not delivered")
	}
}

// alertSink is a webhook receiving alerts.
type alertSink struct {
	mu     sync.Mutex
	alerts []map[string]any
	status int
	hang   bool
	got    chan struct{}
	srv    *httptest.Server
}

func newAlertSink(t *testing.T, status int, hang bool) *alertSink {
	s := &alertSink{status: status, hang: hang, got: make(chan struct{}, 100)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var a map[string]any
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &a) != nil {
			t.Errorf("alert request %s %q: %s", r.Method, r.Header.Get("Content-Type"), body)
		}
		s.mu.Lock()
		s.alerts = append(s.alerts, a)
		s.mu.Unlock()
		s.got <- struct{}{}
		if s.hang {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(s.status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *alertSink) list() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.alerts)
}

func (s *alertSink) wait(t *testing.T, n int) {
	t.Helper()
	relaytest.WaitFor(t, 30*time.Second, fmt.Sprintf("%d alerts", n), func() bool { return len(s.list()) >= n })
}

func TestAlertsDeadLettersRateLimited(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	sink := newAlertSink(t, http.StatusOK, false)
	pub := refusing("a.bad", publisher.Permanent(errors.New("schema mismatch")))
	logs := &logCapture{}
	cfg := relaytest.Config(pub)
	cfg.Logger = slog.New(logs)
	cfg.ID = "relay-a"
	cfg.Alerts = &outbox.AlertConfig{WebhookURL: sink.srv.URL + "/hooks/secret-path", MinInterval: time.Hour}
	stop := relaytest.Start(t, db, cfg)
	e := relaytest.NewEnqueuer(t, db)
	first, err := e.Enqueue(context.Background(), []outbox.Message{{Topic: "a.bad", Payload: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	sink.wait(t, 1)
	// Within MinInterval: held back, and counted.
	if _, err := e.Enqueue(context.Background(), []outbox.Message{{Topic: "a.bad", Payload: []byte(`{}`)}, {Topic: "a.ok", Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 30*time.Second, "2 dead", func() bool { return relaytest.Count(t, db, "dead") == 2 })
	stop()

	alerts := sink.list()
	if len(alerts) != 1 {
		t.Fatalf("%d alerts, want 1: %v", len(alerts), alerts)
	}
	a := alerts[0]
	ex, _ := a["examples"].([]any)
	if a["kind"] != outbox.AlertDeadLetters || a["count"] != 1.0 || a["relay"] != "relay-a" || len(ex) != 1 ||
		!strings.HasPrefix(a["text"].(string), "outbox: 1 new dead letter (relay relay-a)") {
		t.Fatalf("alert %v", a)
	}
	e0 := ex[0].(map[string]any)
	if e0["message_id"] != first[0] || e0["topic"] != "a.bad" || e0["error"] != "schema mismatch" {
		t.Errorf("example %v", e0)
	}
	if got := logs.find(slog.LevelWarn, "outbox relay: alert"); len(got) != 1 || got[0]["kind"] != outbox.AlertDeadLetters || got[0]["text"] != a["text"] {
		t.Errorf("alert log lines %v", got)
	}
	held := logs.find(slog.LevelWarn, "outbox relay: dead letters not yet alerted when the relay stopped")
	if len(held) != 1 || held[0]["count"] != "1" {
		t.Errorf("held-back count lines %v, want one with count 1", held)
	}
}

// TestAlertsOldestPendingAndRecovery: the backlog alert watches how long
// the oldest due message has waited. A message delayed by an hour never
// fires it; a due message that the destination holds up does, and its
// delivery brings the recovery.
func TestAlertsOldestPendingAndRecovery(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	sink := newAlertSink(t, http.StatusNoContent, false)
	release := make(chan struct{})
	cfg := relaytest.Config(outbox.PublisherFunc(func(ctx context.Context, env *outbox.Envelope) error {
		if env.Topic == "p.held" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}))
	cfg.MetricsInterval = 50 * time.Millisecond
	cfg.PublishTimeout = time.Minute
	cfg.Alerts = &outbox.AlertConfig{WebhookURL: sink.srv.URL, OldestPendingAge: 200 * time.Millisecond, MinInterval: time.Hour}
	e := relaytest.NewEnqueuer(t, db)
	if _, err := e.Enqueue(context.Background(), []outbox.Message{{Topic: "p.later", Payload: []byte(`{}`), Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	// Make the delayed message look old: it was enqueued a day ago.
	db.Exec(t, `UPDATE outbox_messages SET created_at = now() - interval '1 day'`)
	stop := relaytest.Start(t, db, cfg)
	if _, err := e.Enqueue(context.Background(), []outbox.Message{{Topic: "p.held", Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	sink.wait(t, 1)
	close(release)
	sink.wait(t, 2)
	stop()
	alerts := sink.list()
	if len(alerts) != 2 {
		t.Fatalf("%d alerts, want 2: %v", len(alerts), alerts)
	}
	a := alerts[0]
	if a["kind"] != outbox.AlertOldestPending || a["count"] != 2.0 || a["oldest_due_age_seconds"].(float64) <= 0.2 ||
		a["oldest_due_age_seconds"].(float64) > 3600 || a["oldest_pending_age_seconds"].(float64) < 86000 {
		t.Errorf("first alert %v", a)
	}
	if a := alerts[1]; a["kind"] != outbox.AlertOldestPendingRecovered || a["count"] != 1.0 || a["oldest_due_age_seconds"] != 0.0 {
		t.Errorf("second alert %v", a)
	}
	if relaytest.Count(t, db, "sent") != 1 || relaytest.Count(t, db, "pending") != 1 {
		t.Error("want the held message sent and the delayed one pending")
	}
}

func TestAlertWebhookFailureDoesNotHoldDelivery(t *testing.T) {
	for _, c := range []struct {
		name string
		sink func(t *testing.T) *alertSink
		log  bool // a failure line is expected
	}{
		{"503", func(t *testing.T) *alertSink { return newAlertSink(t, http.StatusServiceUnavailable, false) }, true},
		{"hangs", func(t *testing.T) *alertSink { return newAlertSink(t, 0, true) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := testdb.New(t, store.Postgres)
			sink := c.sink(t)
			pub := refusing("w.bad", publisher.Permanent(errors.New("no")))
			logs := &logCapture{}
			cfg := relaytest.Config(pub)
			cfg.Logger = slog.New(logs)
			cfg.Alerts = &outbox.AlertConfig{WebhookURL: sink.srv.URL + "/services/T0/B0/hooksecret", MinInterval: time.Millisecond}
			stop := relaytest.Start(t, db, cfg)
			e := relaytest.NewEnqueuer(t, db)
			if _, err := e.Enqueue(context.Background(), []outbox.Message{{Topic: "w.bad", Payload: []byte(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			sink.wait(t, 1)
			// While the webhook fails or hangs, delivery goes on, dead
			// letters included.
			if _, err := e.Enqueue(context.Background(), append(relaytest.Messages("w.ok", 0, 50, 5), outbox.Message{Topic: "w.bad", Payload: []byte(`{}`)})); err != nil {
				t.Fatal(err)
			}
			relaytest.WaitFor(t, 30*time.Second, "50 sent, 2 dead", func() bool {
				return relaytest.Count(t, db, "sent") == 50 && relaytest.Count(t, db, "dead") == 2
			})
			if c.log {
				relaytest.WaitFor(t, 30*time.Second, "a failure line", func() bool {
					return len(logs.find(slog.LevelWarn, "outbox relay: alert webhook failed")) > 0
				})
				f := logs.find(slog.LevelWarn, "outbox relay: alert webhook failed")[0]
				if !strings.Contains(f["err"], "503") || f["webhook"] != strings.TrimPrefix(sink.srv.URL, "http://") {
					t.Errorf("failure line %v", f)
				}
			}
			stop()
			if strings.Contains(logs.text(), "hooksecret") {
				t.Errorf("logs name the webhook's path:\n%s", logs.text())
			}
		})
	}
}

// refusing is a destination that fails every message of topic with err
// and takes every other one.
func refusing(topic string, err error) outbox.Publisher {
	return outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
		if env.Topic == topic {
			return err
		}
		return nil
	})
}
