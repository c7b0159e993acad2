package relay

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// prepareRelay is a relay routing every topic to a publisher that accepts
// everything, for prepare alone.
func prepareRelay(t testing.TB) *Relay {
	t.Helper()
	r, err := New(&store.Backend{}, Config{
		Routes: []Route{{Pattern: "*", Publisher: publishFunc(func(*publisher.Envelope) error { return nil })}}, ID: "test",
		Logger: slog.New(slog.DiscardHandler), BatchSize: 100, Workers: 1, MinBatchSize: 100,
		MinPollInterval: time.Millisecond, MaxPollInterval: time.Second, PublishTimeout: 5 * time.Second,
		ShutdownTimeout: time.Second, LeaseTTL: 5 * time.Second, MaxPayloadBytes: 1 << 20, MetricsInterval: time.Minute,
		Store: &fakeStore{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// oddRow is a good row with one thing changed by edit.
func oddRow(edit func(*store.Row)) store.Row {
	r := store.Row{ID: 1, MessageID: "0b9d6c1e-3f7a-4b7e-9a51-2d1f3c4e5a6b", Topic: "php.created", Key: "p1", HasKey: true,
		Payload: `{}`, Headers: `{}`, MaxAttempts: 10, CreatedAt: time.Now()}
	if edit != nil {
		edit(&r)
	}
	return r
}

// TestPrepareRowsWrittenByPlainSQL: each odd value a plain-SQL producer
// can write is normalized or dead with its reason, as docs/design.md
// ("Rows written by plain SQL") says.
func TestPrepareRowsWrittenByPlainSQL(t *testing.T) {
	headers := func(h string) func(*store.Row) { return func(r *store.Row) { r.Headers = h } }
	for _, c := range []struct {
		name string
		edit func(*store.Row)
		dead string            // "": delivered
		want map[string]string // headers of a delivered row besides the relay's
	}{
		{"headers null", headers("null"), "", nil},
		{"headers NULL or empty", headers(""), "", nil},
		{"headers blank", headers(" \n\t"), "", nil},
		{"headers null with blanks", headers(" null "), "", nil},
		{"headers object", headers(`{"x-tenant":"t1"}`), "", map[string]string{"x-tenant": "t1"}},
		{"header values number, bool, null", headers(`{"n":42,"f":1.5e3,"b":true,"z":null,"s":"v"}`), "",
			map[string]string{"n": "42", "f": "1.5e3", "b": "true", "s": "v"}},
		{"header value null", headers(`{"z":null,"s":"v"}`), "", map[string]string{"s": "v"}},
		{"header value holding null", headers(`{"s":"nullable"}`), "", map[string]string{"s": "nullable"}},
		{"headers array", headers(`["a"]`), "headers are not a JSON object of strings: a JSON array", nil},
		{"headers number", headers(`42`), "headers are not a JSON object of strings: a JSON number", nil},
		{"headers string", headers(`"x"`), "headers are not a JSON object of strings: a JSON string", nil},
		{"headers bool", headers(`false`), "headers are not a JSON object of strings: a JSON bool", nil},
		{"headers invalid JSON", headers(`{"a":`), "headers are not a JSON object of strings", nil},
		{"header value object", headers(`{"a":{"b":"c"}}`), `the value of "a" is a JSON object`, nil},
		{"header value array", headers(`{"a":[1]}`), `the value of "a" is a JSON array`, nil},
		{"headers not UTF-8", headers("{\"a\":\"\xff\"}"), "headers are not UTF-8 text", nil},
		{"header name invalid", headers(`{"a b":"c"}`), "invalid header name", nil},
		{"header name reserved", headers(`{"outbox-topic":"c"}`), "is reserved", nil},
		{"topic empty", func(r *store.Row) { r.Topic = "" }, "topic is required", nil},
		{"topic 10,000 characters", func(r *store.Row) { r.Topic = strings.Repeat("a", 10000) }, "invalid topic", nil},
		{"topic not UTF-8", func(r *store.Row) { r.Topic = "order.\xff" }, "invalid topic", nil},
		{"key 10,000 characters", func(r *store.Row) { r.Key = strings.Repeat("k", 10000) }, "invalid business key: longer than 255 bytes", nil},
		{"key not UTF-8", func(r *store.Row) { r.Key = "k\xff" }, "invalid business key: not UTF-8 text", nil},
		{"key empty", func(r *store.Row) { r.Key = "" }, "", nil},
		{"message id empty", func(r *store.Row) { r.MessageID = "" }, "invalid message id: empty", nil},
		{"message id not UTF-8", func(r *store.Row) { r.MessageID = "m\xff" }, "invalid message id: not UTF-8 text", nil},
		{"message id with a newline", func(r *store.Row) { r.MessageID = "m\n1" }, "invalid message id: has a control character", nil},
		{"message id 10,000 characters", func(r *store.Row) { r.MessageID = strings.Repeat("m", 10000) }, "invalid message id: longer than 255 bytes", nil},
		{"payload not UTF-8", func(r *store.Row) { r.Payload = "\xff\xfe\x00" }, "", nil},
		{"payload bad base64", func(r *store.Row) { r.Headers = `{"content-transfer-encoding":"base64"}`; r.Payload = "%%%" }, "payload is not valid base64", nil},
		{"payload over the limit", func(r *store.Row) { r.Payload = strings.Repeat("x", 1<<20+1) }, "payload too large: 1048577 bytes, limit 1048576", nil},
		{"payload left out of the read", func(r *store.Row) { r.Payload, r.Oversize, r.PayloadBytes = "", true, 200<<20 }, "payload too large: 209715200 bytes, limit 1048576", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := prepareRelay(t)
			row := oddRow(c.edit)
			it := r.prepareContained(&row, nil)
			if c.dead != "" {
				if !it.decided || it.out.Status != store.StatusDead || !strings.Contains(it.out.Error, c.dead) || !it.out.CountAttempt {
					t.Fatalf("outcome %+v (decided %v), want dead with %q", it.out, it.decided, c.dead)
				}
				return
			}
			if it.decided || it.env == nil {
				t.Fatalf("decided %+v, want a message to publish", it.out)
			}
			for k, v := range c.want {
				if got, ok := it.env.Headers[k]; !ok || got != v {
					t.Errorf("header %q = %q, %v; want %q", k, got, ok, v)
				}
			}
			for k := range it.env.Headers {
				switch _, wanted := c.want[k]; {
				case wanted, k == publisher.HeaderTopic, k == publisher.HeaderBusinessKey, k == publisher.HeaderContentType:
				default:
					t.Errorf("unexpected header %q", k)
				}
			}
			if it.env.Headers[publisher.HeaderTopic] != row.Topic {
				t.Errorf("outbox-topic header %q", it.env.Headers[publisher.HeaderTopic])
			}
			if c.name == "payload not UTF-8" && string(it.env.Payload) != row.Payload {
				t.Errorf("payload %q, want the row's bytes %q", it.env.Payload, row.Payload)
			}
		})
	}
}

// TestPrepareCounters: negative attempts count as 0 and a max_attempts
// of 0 or less as 1: the message is published once, and its first failure
// is its last.
func TestPrepareCounters(t *testing.T) {
	r := prepareRelay(t)
	for _, c := range []struct{ attempts, max, wantAttempts, wantMax int }{
		{-5, 0, 0, 1}, {0, -1, 0, 1}, {3, 5, 3, 5}, {-1 << 31, -1 << 31, 0, 1}, {-2, 4, 0, 4},
	} {
		row := oddRow(func(r *store.Row) { r.Attempts, r.MaxAttempts = c.attempts, c.max })
		it := r.prepare(&row)
		if it.decided || row.Attempts != c.wantAttempts || row.MaxAttempts != c.wantMax || it.env.Attempt != c.wantAttempts+1 {
			t.Errorf("attempts %d, max %d: row %d/%d, envelope attempt %d, decided %v", c.attempts, c.max, row.Attempts, row.MaxAttempts, it.env.Attempt, it.decided)
		}
		want := store.StatusPending
		if c.wantAttempts+1 >= c.wantMax {
			want = store.StatusDead
		}
		if out := r.failure(it.route, it, errors.New("down")); out.Status != want {
			t.Errorf("attempts %d, max %d: a failure is %+v, want %s", c.attempts, c.max, out, want)
		}
	}
}

// TestPrepareCreatedAt: a created_at that cannot be when the row was
// written is unknown (zero), so that no latency is measured from it.
func TestPrepareCreatedAt(t *testing.T) {
	r := prepareRelay(t)
	now := time.Now()
	for _, c := range []struct {
		at    time.Time
		known bool
	}{
		{now.Add(-time.Minute), true}, {now.Add(time.Minute), true}, {time.Time{}, false}, {time.Unix(-1, 0), false},
		{now.Add(48 * time.Hour), false}, {time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC), false}, {time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC), true},
	} {
		row := oddRow(func(r *store.Row) { r.CreatedAt = c.at })
		it := r.prepare(&row)
		if it.env.CreatedAt.IsZero() == c.known || row.CreatedAt.IsZero() == c.known {
			t.Errorf("created_at %v: envelope %v, row %v; known %v", c.at, it.env.CreatedAt, row.CreatedAt, c.known)
		}
	}
}

// TestOneLine: last_error is one line of UTF-8 without NUL, cut on a
// character boundary.
func TestOneLine(t *testing.T) {
	for _, s := range []string{strings.Repeat("é", 700), "a\x00b\xffc\nd", strings.Repeat("x", 999) + "€€"} {
		got := oneLine(s)
		if !utf8.ValidString(got) || strings.ContainsAny(got, "\x00\n") || len(got) > 1000+len("…") {
			t.Errorf("oneLine(%q…) = %q", s[:min(len(s), 20)], got)
		}
	}
	if got := oneLine("a\x00b\xffc"); got != "ab\uFFFDc" {
		t.Errorf("oneLine = %q", got)
	}
}

// TestCheckerPanicIsTheMessages: a Checker that panics on a message
// charges it an attempt of unknown outcome instead of ending the process.
func TestCheckerPanicIsTheMessages(t *testing.T) {
	st := &fakeStore{rows: []store.Row{
		func() store.Row { r := row(1, "order.created", "", ""); r.UnknownOutcome = true; return r }(),
		func() store.Row {
			r := row(2, "order.created", "", "")
			r.UnknownOutcome, r.Attempts, r.MaxAttempts = true, 2, 3
			return r
		}(),
	}}
	r := newRouteRelay(t, st, Route{Pattern: "order.*", Publisher: publishFunc(func(*publisher.Envelope) error { return nil }),
		Checker: checkFunc(func(context.Context, *publisher.Envelope) (bool, error) { panic("checker bug") })})
	if _, err := r.round(t.Context(), &worker{batchSize: 100, wake: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	o, ok := st.outcome(t, 1)
	if !ok || o.Status != store.StatusPending || !o.Unknown || !o.CountAttempt || !strings.Contains(o.Error, "checking delivery panicked: checker bug") {
		t.Errorf("message 1: %+v, %v", o, ok)
	}
	o, ok = st.outcome(t, 2)
	if !ok || o.Status != store.StatusDead || !strings.Contains(o.Error, "max attempts (3) reached") {
		t.Errorf("message 2, last attempt: %+v, %v", o, ok)
	}
}

// FuzzPrepare: whatever a row holds, prepare and the start of its publish
// (the trace headers) do not panic; the row is either dead with a one-line
// UTF-8 reason or an envelope of UTF-8 header names and values.
func FuzzPrepare(f *testing.F) {
	f.Add("php.created", "p1", `{}`, "null", "0b9d6c1e-3f7a-4b7e-9a51-2d1f3c4e5a6b", -1, 0, int64(0), false)
	f.Add("a", "", "\xff", `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"x"}`, "m", 0, 1, int64(1), false)
	f.Add("order.x", "k", "p", `{"traceparent":"garbage","n":1,"b":[1]}`, "id", 3, 2, int64(-1<<62), false)
	f.Add("", "\x00", "", `[`, "", 1<<30, -5, int64(1<<62), true)
	tp := sdktrace.NewTracerProvider()
	f.Fuzz(func(t *testing.T, topic, key, payload, headers, id string, attempts, maxAttempts int, createdNs int64, oversize bool) {
		r := prepareRelay(t)
		r.tracer = tp.Tracer("fuzz")
		row := store.Row{ID: 1, MessageID: id, Topic: topic, Key: key, HasKey: key != "", Payload: payload, Headers: headers,
			Attempts: attempts, MaxAttempts: maxAttempts, CreatedAt: time.Unix(0, createdNs), Oversize: oversize, PayloadBytes: int64(len(payload))}
		it := r.prepareContained(&row, nil)
		if strings.HasPrefix(it.out.Error, "preparing the message panicked") {
			t.Fatalf("prepare panicked: %s", it.out.Error)
		}
		if it.decided {
			if it.out.Status == store.StatusDead && (it.out.Error == "" || !utf8.ValidString(it.out.Error) || strings.ContainsAny(it.out.Error, "\n\x00")) {
				t.Fatalf("dead with reason %q", it.out.Error)
			}
			return
		}
		if row.Attempts < 0 || row.MaxAttempts <= 0 {
			t.Fatalf("counters left as %d/%d", row.Attempts, row.MaxAttempts)
		}
		span := r.startSend(it.route, it)
		endSend(span, nil)
		for k, v := range it.env.Headers {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				t.Fatalf("header %q: %q is not UTF-8", k, v)
			}
		}
	})
}

// TestBounded: a dead row's topic or message id of thousands of
// characters is cut for logs and alerts, on a character boundary.
func TestBounded(t *testing.T) {
	if got := bounded("order.created"); got != "order.created" {
		t.Errorf("bounded = %q", got)
	}
	got := bounded(strings.Repeat("é", 5000))
	if !utf8.ValidString(got) || len(got) > 255+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("bounded(5,000 × é) = %q", got)
	}
}
