package outboxkinesis_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxkinesis"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// injected returns a publisher whose client goes through an injector to
// the local server, without the SDK's retries, and the injector.
func injected(t *testing.T, cfg *outboxkinesis.Config) (*outboxkinesis.Publisher, *injector) {
	t.Helper()
	local(t)
	in := newInjector(t)
	p, err := outboxkinesis.New(newClient(t, endpoint, in, 1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, in
}

func env(dest, key, payload string) *publisher.Envelope {
	return publishertest.Envelope(dest, key, []byte(payload), "application/json", nil)
}

// ids are the message ids of the records, decoded.
func ids(t *testing.T, stream string, rs []types.Record) []string {
	t.Helper()
	var out []string
	for _, r := range rs {
		out = append(out, received(t, stream, r).ID)
	}
	return out
}

// TestPerRecordOutcomes: in one PutRecords call, a record the service
// throttles is RetryAfter (the route is held, nothing charged), one it
// failed internally is transient, and the others are stored and
// confirmed. The local server never throttles: the two failures are
// injected into its answer at the HTTP level of the real client, with
// the service's error codes, and those records are kept from the server.
func TestPerRecordOutcomes(t *testing.T) {
	t.Parallel()
	p, in := injected(t, &outboxkinesis.Config{ThrottleWait: 3 * time.Second})
	stream := newStream(t, local(t), 2)
	in.record = func(pk string, _ []byte) string {
		switch pk {
		case "k1":
			return outboxkinesis.CodeThroughputExceeded
		case "k3":
			return outboxkinesis.CodeInternalFailure
		}
		return ""
	}
	var batch []*publisher.Envelope
	for i := range 5 {
		batch = append(batch, env(stream, fmt.Sprintf("k%d", i), fmt.Sprintf(`{"i":%d}`, i)))
	}
	errs := publishertest.Publish(t, p, 30*time.Second, batch...)
	if n := len(in.Calls()); n != 1 {
		t.Fatalf("%d PutRecords calls, want 1", n)
	}
	for i, err := range errs {
		switch i {
		case 1:
			publishertest.WantClass(t, "throttled record", err, publisher.ClassTransient, outboxkinesis.CodeThroughputExceeded, stream)
			if d := publisher.RetryAfterOf(err); d != 3*time.Second {
				t.Errorf("throttled record: RetryAfter %v, want the configured 3s", d)
			}
		case 3:
			publishertest.WantClass(t, "failed record", err, publisher.ClassTransient, outboxkinesis.CodeInternalFailure)
			if d := publisher.RetryAfterOf(err); d != 0 {
				t.Errorf("failed record: RetryAfter %v, want none", d)
			}
		default:
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
		}
	}
	got := map[string]bool{}
	for _, id := range ids(t, stream, waitRecords(t, local(t), stream, 3, 10*time.Second)) {
		got[id] = true
	}
	if len(got) != 3 || !got[batch[0].ID] || !got[batch[2].ID] || !got[batch[4].ID] {
		t.Errorf("stream holds %v, want the ids of records 0, 2 and 4", got)
	}
}

// TestCallErrors: the classification of a whole PutRecords call that the
// service refuses, by its real error answers (injected: the local server
// neither throttles nor checks credentials).
func TestCallErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code   string
		status int
		want   publisher.ErrorClass
		after  bool
	}{
		{"ProvisionedThroughputExceededException", 400, publisher.ClassTransient, true},
		{"LimitExceededException", 400, publisher.ClassTransient, true},
		{"ThrottlingException", 400, publisher.ClassTransient, true},
		{"KMSThrottlingException", 400, publisher.ClassTransient, true},
		{"AccessDeniedException", 400, publisher.ClassUnavailable, false},
		{"UnrecognizedClientException", 400, publisher.ClassUnavailable, false},
		{"ExpiredTokenException", 400, publisher.ClassUnavailable, false},
		{"KMSAccessDeniedException", 400, publisher.ClassUnavailable, false},
		{"ResourceNotFoundException", 400, publisher.ClassUnavailable, false},
		{"InternalFailure", 500, publisher.ClassTransient, false},
		{"ServiceUnavailable", 503, publisher.ClassTransient, false},
		{"InvalidArgumentException", 400, publisher.ClassPermanent, false},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			t.Parallel()
			p, in := injected(t, nil)
			in.call = func([]string) (int, string) {
				return c.status, `{"__type":"` + c.code + `","message":"injected ` + c.code + `"}`
			}
			errs := publishertest.Publish(t, p, 30*time.Second, env("orders", "k", `{}`))
			publishertest.WantClass(t, c.code, errs[0], c.want, c.code, "orders")
			if got := publisher.RetryAfterOf(errs[0]) > 0; got != c.after {
				t.Errorf("RetryAfter %v, want one: %v", publisher.RetryAfterOf(errs[0]), c.after)
			}
		})
	}
}

// TestInvalidCallFindsTheRecord: when the service refuses a call of
// several records as invalid, each is sent alone, so only the one it
// refuses goes dead.
func TestInvalidCallFindsTheRecord(t *testing.T) {
	t.Parallel()
	p, in := injected(t, nil)
	stream := newStream(t, local(t), 1)
	in.call = func(keys []string) (int, string) {
		for _, k := range keys {
			if k == "bad" {
				return 400, `{"__type":"InvalidArgumentException","message":"injected: record refused"}`
			}
		}
		return 0, ""
	}
	batch := []*publisher.Envelope{env(stream, "a", `1`), env(stream, "bad", `2`), env(stream, "c", `3`)}
	errs := publishertest.Publish(t, p, 30*time.Second, batch...)
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("the valid records: %v, %v", errs[0], errs[2])
	}
	publishertest.WantClass(t, "refused record", errs[1], publisher.ClassPermanent, "InvalidArgumentException")
	if n := len(in.Calls()); n != 4 {
		t.Errorf("%d PutRecords calls, want 4 (the batch, then each record alone)", n)
	}
	if got := ids(t, stream, waitRecords(t, local(t), stream, 2, 10*time.Second)); len(got) != 2 || got[0] != batch[0].ID || got[1] != batch[2].ID {
		t.Errorf("stream holds %v, want %s and %s", got, batch[0].ID, batch[2].ID)
	}
}

// TestOrderPerKeyWithFailures: a batch of runs (three messages for each
// of several keys) is sent in rounds, one message per key per call; when
// the service fails a key's message mid-run, the key's later messages
// are not sent, while other keys go on; a key whose message goes dead
// (too large) goes on with the next. Sent again as the relay does, each
// key's messages end up in the stream in order.
func TestOrderPerKeyWithFailures(t *testing.T) {
	t.Parallel()
	p, in := injected(t, &outboxkinesis.Config{MaxRecordBytes: 4096})
	if !p.PublishesRuns() {
		t.Fatal("PublishesRuns() = false")
	}
	admin := local(t)
	stream := newStream(t, admin, 2)
	var batch []*publisher.Envelope
	for seq := range 3 {
		for _, k := range []string{"A", "B", "C", "D"} {
			payload := fmt.Sprintf(`{"k":%q,"seq":%d}`, k, seq)
			if k == "D" && seq == 1 {
				payload = `"` + strings.Repeat("x", 5000) + `"`
			}
			batch = append(batch, env(stream, k, payload))
		}
	}
	// The batch as the relay hands runs over: each key's messages in order.
	byKey := map[string][]*publisher.Envelope{}
	for _, e := range batch {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	failA1 := byKey["A"][1].ID
	in.record = func(_ string, data []byte) string {
		if bytes.Contains(data, []byte(failA1)) {
			return outboxkinesis.CodeThroughputExceeded
		}
		return ""
	}
	errs := publishertest.Publish(t, p, 30*time.Second, batch...)
	result := map[string]error{}
	for i, e := range batch {
		result[e.ID] = errs[i]
	}
	for _, k := range []string{"B", "C"} {
		for _, e := range byKey[k] {
			if result[e.ID] != nil {
				t.Errorf("%s: %v", e.Payload, result[e.ID])
			}
		}
	}
	if err := result[byKey["A"][0].ID]; err != nil {
		t.Errorf("A0: %v", err)
	}
	publishertest.WantClass(t, "A1 (throttled)", result[failA1], publisher.ClassTransient, outboxkinesis.CodeThroughputExceeded)
	publishertest.WantClass(t, "A2 (behind the failure)", result[byKey["A"][2].ID], publisher.ClassTransient, "not sent", failA1)
	if err := result[byKey["D"][0].ID]; err != nil {
		t.Errorf("D0: %v", err)
	}
	publishertest.WantClass(t, "D1 (too large)", result[byKey["D"][1].ID], publisher.ClassPermanent, "too large", "limit is 4096 bytes")
	if err := result[byKey["D"][2].ID]; err != nil {
		t.Errorf("D2 after D1 went dead: %v", err)
	}
	for i, keys := range in.Calls() {
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Errorf("call %d carries partition key %s twice: %v", i, k, keys)
			}
			seen[k] = true
		}
	}

	// The relay sends A1 and A2 again, in order.
	in.mu.Lock()
	in.record = nil
	in.mu.Unlock()
	for _, e := range byKey["A"][1:] {
		if err := publishertest.Publish(t, p, 30*time.Second, e)[0]; err != nil {
			t.Fatalf("resend %s: %v", e.Payload, err)
		}
	}
	want := map[string][]string{}
	for k, es := range byKey {
		for _, e := range es {
			if result[e.ID] == nil || k == "A" {
				want[k] = append(want[k], e.ID)
			}
		}
	}
	got := map[string][]string{}
	total := 0
	for _, es := range want {
		total += len(es)
	}
	for _, r := range waitRecords(t, admin, stream, total, 10*time.Second) {
		m := received(t, stream, r)
		got[m.Key] = append(got[m.Key], m.ID)
	}
	for k := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
			t.Errorf("key %s: stream holds %v, want %v in this order", k, got[k], want[k])
		}
	}
}

// TestOversizedIsPermanent: a record over 1 MiB (data and partition key)
// goes dead with its sizes in the reason; the others of its batch are
// stored. A binary payload counts as base64 in the record.
func TestOversizedIsPermanent(t *testing.T) {
	t.Parallel()
	admin := local(t)
	p, err := outboxkinesis.New(admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	stream := newStream(t, admin, 1)
	big := publishertest.Envelope(stream, "k-big", bytes.Repeat([]byte{0xff}, 800<<10), "application/octet-stream", nil)
	ok := publishertest.Envelope(stream, "k-ok", bytes.Repeat([]byte("y"), 700<<10), "text/plain", nil)
	errs := publishertest.Publish(t, p, 30*time.Second, big, ok)
	publishertest.WantClass(t, "800 KiB binary payload", errs[0], publisher.ClassPermanent, "too large", "payload 819200", "partition key 5", "limit is 1048576 bytes per record")
	if errs[1] != nil {
		t.Fatalf("700 KiB text payload: %v", errs[1])
	}
	if got := ids(t, stream, waitRecords(t, admin, stream, 1, 10*time.Second)); len(got) != 1 || got[0] != ok.ID {
		t.Errorf("stream holds %v, want only %s", got, ok.ID)
	}
}

// TestSplitsCalls: a batch is split into PutRecords calls of at most 500
// records and 5 MiB, every record confirmed.
func TestSplitsCalls(t *testing.T) {
	t.Parallel()
	p, in := injected(t, nil)
	stream := newStream(t, local(t), 2)
	var batch []*publisher.Envelope
	for i := range 501 {
		batch = append(batch, env(stream, fmt.Sprintf("k%d", i), `{}`))
	}
	big := `"` + strings.Repeat("z", 900<<10) + `"`
	for i := range 7 { // 7 × 900 KiB: 5 fit in a call under 5 MiB
		batch = append(batch, env(stream, fmt.Sprintf("big%d", i), big))
	}
	for i, err := range publishertest.Publish(t, p, 60*time.Second, batch...) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	var sizes []int
	for _, c := range in.Calls() {
		sizes = append(sizes, len(c))
	}
	if fmt.Sprint(sizes) != "[500 6 2]" { // 500; 1 small + 5 big (4.4 MiB); 2 big
		t.Errorf("calls of %v records, want [500 6 2]", sizes)
	}
	if n := len(readAll(t, local(t), stream)); n != len(batch) {
		t.Errorf("stream holds %d records, want %d", n, len(batch))
	}
}

// TestMissingStream: publishing to a stream that does not exist is
// Unavailable (the route waits, nothing is charged); once the stream is
// created the same publisher delivers.
func TestMissingStream(t *testing.T) {
	t.Parallel()
	admin := local(t)
	p, err := outboxkinesis.New(admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := testdb.RandomName("later_")
	e := env(name, "k", `{"n":1}`)
	errs := publishertest.Publish(t, p, 30*time.Second, e)
	publishertest.WantClass(t, "missing stream", errs[0], publisher.ClassUnavailable, name, "does not exist", "ResourceNotFoundException")
	createStream(t, admin, name, 1)
	if err := publishertest.Publish(t, p, 30*time.Second, e)[0]; err != nil {
		t.Fatalf("after the stream was created: %v", err)
	}
	if got := ids(t, name, waitRecords(t, admin, name, 1, 10*time.Second)); len(got) != 1 || got[0] != e.ID {
		t.Errorf("stream holds %v", got)
	}
}

// TestUnreachable: an endpoint nothing listens on is Unavailable.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	p, err := outboxkinesis.New(newClient(t, "http://127.0.0.1:1", nil, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := publishertest.Publish(t, p, 30*time.Second, env("orders", "k", `{}`))
	publishertest.WantClass(t, "unreachable endpoint", errs[0], publisher.ClassUnavailable, "orders")
}

// TestStreamFromConfig: Config.Stream sends every message there,
// whatever its destination; an invalid destination name is permanent.
func TestStreamFromConfig(t *testing.T) {
	t.Parallel()
	admin := local(t)
	stream := newStream(t, admin, 1)
	p, err := outboxkinesis.New(admin, &outboxkinesis.Config{Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	e := env("order.created", "k", `{}`)
	if err := publishertest.Publish(t, p, 30*time.Second, e)[0]; err != nil {
		t.Fatal(err)
	}
	if got := ids(t, stream, waitRecords(t, admin, stream, 1, 10*time.Second)); len(got) != 1 || got[0] != e.ID {
		t.Errorf("stream holds %v", got)
	}
	byDest, _ := outboxkinesis.New(admin, nil)
	errs := publishertest.Publish(t, byDest, 30*time.Second, env("order/created", "k", `{}`))
	publishertest.WantClass(t, "invalid stream name", errs[0], publisher.ClassPermanent, `destination "order/created": invalid stream name`)
}

// TestLongKeyIsHashed: a business key over 256 characters gets the
// partition key "sha256:<hex>", the same for each of its messages (one
// shard, in order); the record keeps the key itself.
func TestLongKeyIsHashed(t *testing.T) {
	t.Parallel()
	admin := local(t)
	p, _ := outboxkinesis.New(admin, nil)
	stream := newStream(t, admin, 4)
	key := strings.Repeat("ключ-", 60) // 300 characters
	batch := []*publisher.Envelope{env(stream, key, `{"seq":0}`), env(stream, key, `{"seq":1}`)}
	for i, err := range publishertest.Publish(t, p, 30*time.Second, batch...) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	rs := waitRecords(t, admin, stream, 2, 10*time.Second)
	want := outboxkinesis.PartitionKey(key, "")
	if !strings.HasPrefix(want, outboxkinesis.HashedKeyPrefix) || len(want) != 71 {
		t.Fatalf("PartitionKey = %q", want)
	}
	for i, r := range rs {
		if aws.ToString(r.PartitionKey) != want {
			t.Errorf("record %d: partition key %q, want %q", i, aws.ToString(r.PartitionKey), want)
		}
		m := received(t, stream, r)
		if m.Key != key || m.ID != batch[i].ID {
			t.Errorf("record %d: key %q id %s, want the long key and %s", i, m.Key, m.ID, batch[i].ID)
		}
	}
}

func TestPartitionKey(t *testing.T) {
	t.Parallel()
	astral := strings.Repeat("😀", 128) // 128 characters, 256 UTF-16 units
	for _, c := range []struct{ key, id, want string }{
		{"order-42", "id-1", "order-42"},
		{"", "id-1", "id-1"},
		{strings.Repeat("a", 256), "id", strings.Repeat("a", 256)},
		{astral, "id", astral},
		{astral + "x", "id", "sha256:"},
		{strings.Repeat("a", 257), "id", "sha256:"},
	} {
		got := outboxkinesis.PartitionKey(c.key, c.id)
		if got != c.want && (c.want != "sha256:" || !strings.HasPrefix(got, c.want) || len(got) != 71) {
			t.Errorf("PartitionKey(%.20q…) = %q, want %q", c.key, got, c.want)
		}
		if again := outboxkinesis.PartitionKey(c.key, c.id); again != got {
			t.Errorf("PartitionKey is not stable: %q then %q", got, again)
		}
	}
}

// TestRecordForm: the JSON framing other languages rely on, field by
// field, for each kind of payload, and Decode's reading of it.
func TestRecordForm(t *testing.T) {
	t.Parallel()
	admin := local(t)
	p, _ := outboxkinesis.New(admin, nil)
	stream := newStream(t, admin, 1)
	cases := []struct {
		name, ct, payload string
		embedded          bool
	}{
		{"json", "application/json", `{"order_id":42, "note":"spaces  kept","n":1.50}`, true},
		{"json suffix", "application/vnd.acme+json; charset=utf-8", `[1,2]`, true},
		{"json with blanks around", "application/json", " {\"a\":1}\n", false},
		{"json type, not json", "application/json", `not json`, false},
		{"text", "text/plain", "plain text ü", false},
		{"binary", "application/octet-stream", "\x00\xff\xfe", false},
		{"empty", "application/json", "", false},
	}
	var batch []*publisher.Envelope
	for i, c := range cases {
		e := publishertest.Envelope(stream, fmt.Sprintf("key-%d", i), []byte(c.payload), c.ct, map[string]string{"x-tenant": "acme", publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
		batch = append(batch, e)
	}
	noKey := publishertest.Envelope(stream, "", []byte(`{}`), "application/json", nil)
	batch = append(batch, noKey)
	for i, err := range publishertest.Publish(t, p, 30*time.Second, batch...) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	byID := map[string]types.Record{}
	for _, r := range waitRecords(t, admin, stream, len(batch), 10*time.Second) {
		var f struct {
			ID string `json:"message_id"`
		}
		if err := json.Unmarshal(r.Data, &f); err != nil {
			t.Fatalf("record data is not JSON: %q", r.Data)
		}
		byID[f.ID] = r
	}
	for i, c := range cases {
		e := batch[i]
		r := byID[e.ID]
		var f map[string]json.RawMessage
		if err := json.Unmarshal(r.Data, &f); err != nil {
			t.Fatal(err)
		}
		var headers map[string]string
		_ = json.Unmarshal(f["headers"], &headers)
		if string(f["topic"]) != `"conformance.test"` || string(f["business_key"]) != fmt.Sprintf(`"key-%d"`, i) ||
			headers["x-tenant"] != "acme" || headers["content-type"] != c.ct || headers["outbox-topic"] != "conformance.test" {
			t.Errorf("%s: framing %s", c.name, r.Data)
		}
		_, b64 := f["payload_base64"]
		if c.embedded && (string(f["payload"]) != c.payload || b64) {
			t.Errorf("%s: payload not embedded as it is: %s", c.name, r.Data)
		}
		if !c.embedded && (f["payload"] != nil || !b64) {
			t.Errorf("%s: want payload_base64: %s", c.name, r.Data)
		}
		if aws.ToString(r.PartitionKey) != e.Key {
			t.Errorf("%s: partition key %q, want %q", c.name, aws.ToString(r.PartitionKey), e.Key)
		}
		m, err := outboxkinesis.Decode(r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.ID != e.ID || m.Topic != e.Topic || m.Key != e.Key || m.ContentType != c.ct || !bytes.Equal(m.Payload, e.Payload) ||
			m.Headers["x-tenant"] != "acme" || m.Headers[publisher.HeaderTraceParent] != e.Headers[publisher.HeaderTraceParent] {
			t.Errorf("%s: decoded %+v", c.name, m)
		}
	}
	r := byID[noKey.ID]
	if aws.ToString(r.PartitionKey) != noKey.ID || bytes.Contains(r.Data, []byte("business_key")) {
		t.Errorf("message without key: partition key %q, data %s", aws.ToString(r.PartitionKey), r.Data)
	}
}

// TestCloudEventsForm: with CloudEvents the record is one event in the
// JSON event format; producer headers travel as extensions (or in
// outboxheaders when their names cannot be attribute names); Decode
// gives back the same message as the plain form.
func TestCloudEventsForm(t *testing.T) {
	t.Parallel()
	admin := local(t)
	p, err := outboxkinesis.New(admin, &outboxkinesis.Config{CloudEvents: &outboxce.Format{Source: "/orders"}})
	if err != nil {
		t.Fatal(err)
	}
	stream := newStream(t, admin, 1)
	e := publishertest.Envelope(stream, "order-42", []byte(`{"order_id":42}`), "application/json",
		map[string]string{"tenant": "acme", "x-request-id": "r-1", publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	bin := publishertest.Envelope(stream, "", []byte{0xff, 0xfe, 0}, "application/octet-stream", nil)
	for i, err := range publishertest.Publish(t, p, 30*time.Second, e, bin) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	rs := waitRecords(t, admin, stream, 2, 10*time.Second)
	var ev map[string]any
	if err := json.Unmarshal(rs[0].Data, &ev); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"specversion": "1.0", "id": e.ID, "source": "/orders", "type": "conformance.test", "subject": "order-42",
		"datacontenttype": "application/json", "tenant": "acme", "outboxheaders": `{"x-request-id":"r-1"}`,
		"traceparent": e.Headers[publisher.HeaderTraceParent]}
	for k, v := range want {
		if ev[k] != v {
			t.Errorf("event attribute %s = %v, want %v (event %s)", k, ev[k], v, rs[0].Data)
		}
	}
	if d, ok := ev["data"].(map[string]any); !ok || d["order_id"] != float64(42) {
		t.Errorf("event data %v", ev["data"])
	}
	for i, orig := range []*publisher.Envelope{e, bin} {
		m, err := outboxkinesis.Decode(rs[i])
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != orig.ID || m.Topic != orig.Topic || m.Key != orig.Key || !bytes.Equal(m.Payload, orig.Payload) ||
			m.ContentType != orig.Headers[publisher.HeaderContentType] {
			t.Errorf("decoded %+v, want %+v", m, orig)
		}
		for k, v := range orig.Headers {
			if m.Headers[k] != v {
				t.Errorf("message %d: header %s = %q, want %q", i, k, m.Headers[k], v)
			}
		}
	}
	if !bytes.Contains(rs[1].Data, []byte(`"data_base64":"//4A"`)) {
		t.Errorf("binary event: %s", rs[1].Data)
	}
}

// TestNewValidates: a bad Config is one line naming the field.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	c := kinesis.New(kinesis.Options{Region: region})
	for _, tc := range []struct {
		cfg  outboxkinesis.Config
		says string
	}{
		{outboxkinesis.Config{Stream: "a", StreamARN: "arn:aws:kinesis:us-east-1:123456789012:stream/a"}, "not both"},
		{outboxkinesis.Config{Stream: "bad name"}, "Config.Stream"},
		{outboxkinesis.Config{StreamARN: "arn:aws:sqs:us-east-1:123456789012:q"}, "Config.StreamARN"},
		{outboxkinesis.Config{MaxRecordsPerCall: 501}, "MaxRecordsPerCall"},
		{outboxkinesis.Config{MaxRecordBytes: 2 << 20, MaxRequestBytes: 1 << 20}, "MaxRequestBytes"},
		{outboxkinesis.Config{ThrottleWait: -1}, "must not be negative"},
	} {
		_, err := outboxkinesis.New(c, &tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("New(%+v) = %v, want an error saying %q", tc.cfg, err, tc.says)
		}
	}
	if _, err := outboxkinesis.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, err := outboxkinesis.New(c, &outboxkinesis.Config{StreamARN: "arn:aws:kinesis:us-east-1:123456789012:stream/orders"}); err != nil {
		t.Errorf("valid ARN: %v", err)
	}
}

// TestNoCredentials: credentials that cannot be had are Unavailable:
// nothing was sent.
func TestNoCredentials(t *testing.T) {
	t.Parallel()
	c := kinesis.New(kinesis.Options{Region: region, BaseEndpoint: aws.String(endpoint), RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no credentials here")
		})})
	p, err := outboxkinesis.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := publishertest.Publish(t, p, 30*time.Second, env("orders", "k", `{}`))
	publishertest.WantClass(t, "no credentials", errs[0], publisher.ClassUnavailable, "no credentials here")
}
