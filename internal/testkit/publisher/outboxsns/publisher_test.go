package outboxsns_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/txoutbox/outbox/internal/testkit/sqstest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxsns"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// target is the local server: each destination is a fresh topic with a
// queue subscribed to it with raw message delivery, read back and decoded
// with outboxsqs.Decode. The publisher's client goes to endpoint.
func target(t *testing.T, endpoint string, fifo bool) *publishertest.Target {
	s, q := clients(t)
	p, err := outboxsns.New(newSNS(endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := sqstest.NewReader(q)
	var mu sync.Mutex
	queues := map[string]string{}
	return &publishertest.Target{
		Publisher: p,
		NewDestination: func(t *testing.T) string {
			name := sqstest.RandomName("outboxtest-")
			if fifo {
				name += ".fifo"
			}
			arn := createTopic(t, s, name)
			mu.Lock()
			queues[arn] = subscribedQueue(t, s, q, arn, true)
			mu.Unlock()
			return arn
		},
		Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
			mu.Lock()
			url := queues[dest]
			mu.Unlock()
			var out []publishertest.Received
			for _, raw := range r.Read(t, url, n, 20*time.Second) {
				m, err := outboxsqs.Decode(raw)
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				out = append(out, publishertest.Received{ID: m.ID, Key: m.Key, Topic: m.Topic, Destination: dest, Payload: m.Payload, Headers: m.Headers})
			}
			return out
		},
	}
}

// TestConformance runs the publisher conformance suite on standard and
// FIFO topics (each with a queue subscribed), the publisher's client
// through a fault proxy. A missing topic takes the route down instead of
// being permanent (TestMissingTopic).
func TestConformance(t *testing.T) { sqstest.RunConformance(t, target) }

// TestFanOut: one message to a topic reaches a queue with raw message
// delivery and one without (the SNS JSON envelope in the body); Decode
// reads both into the same message. A binary payload and headers past the
// attribute limit make the trip too.
func TestFanOut(t *testing.T) {
	t.Parallel()
	s, q := clients(t)
	arn := createTopic(t, s, sqstest.RandomName("outboxtest-"))
	raw := subscribedQueue(t, s, q, arn, true)
	wrapped := subscribedQueue(t, s, q, arn, false)
	p, err := outboxsns.New(newSNS(sqstest.Endpoint), &outboxsns.Config{TopicARN: arn})
	if err != nil {
		t.Fatal(err)
	}
	many := map[string]string{publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for i := range 12 {
		many[fmt.Sprintf("x-h%02d", i)] = fmt.Sprint("v", i)
	}
	text := sqstest.Env("ignored", "order-42", `{"order_id":42}`, many)
	binary := publishertest.Envelope("ignored", "k2", []byte{0, 0xff, 1, 'x'}, "application/octet-stream", nil)
	sqstest.PublishOK(t, p, text, binary)
	r := sqstest.NewReader(q)
	for _, url := range []string{raw, wrapped} {
		got := r.Read(t, url, 2, 20*time.Second)
		for _, m := range got {
			if url == raw && len(m.MessageAttributes) > outboxsns.MaxAttributes {
				t.Errorf("%d attributes", len(m.MessageAttributes))
			}
			d, err := outboxsqs.Decode(m)
			if err != nil {
				t.Fatalf("%s: Decode: %v (body %.200s)", url, err, aws.ToString(m.Body))
			}
			e := text
			if d.ID == binary.ID {
				e = binary
			}
			if d.ID != e.ID || d.Topic != e.Topic || d.Key != e.Key || !bytes.Equal(d.Payload, e.Payload) {
				t.Errorf("%s: decoded %+v, want %+v", url, d, e)
			}
			for k, v := range e.Headers {
				if d.Headers[k] != v {
					t.Errorf("%s: header %s = %q, want %q", url, k, d.Headers[k], v)
				}
			}
		}
	}
}

// TestFIFOTopic: on a FIFO topic the group is the business key (the topic
// when none) and the deduplication id the message id; the subscribed FIFO
// queue shows both.
func TestFIFOTopic(t *testing.T) {
	t.Parallel()
	s, q := clients(t)
	arn := createTopic(t, s, sqstest.RandomName("outboxtest-")+".fifo")
	url := subscribedQueue(t, s, q, arn, true)
	p, err := outboxsns.New(newSNS(sqstest.Endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	keyed, unkeyed := sqstest.Env(arn, "order-42", `1`, nil), sqstest.Env(arn, "", `2`, nil)
	sqstest.PublishOK(t, p, keyed, unkeyed)
	want := map[string]string{keyed.ID: "order-42", unkeyed.ID: "conformance.test"}
	for _, m := range sqstest.NewReader(q).Read(t, url, 2, 20*time.Second) {
		id := aws.ToString(m.MessageAttributes["message-id"].StringValue)
		if g := m.Attributes["MessageGroupId"]; g != want[id] {
			t.Errorf("message %s: group %q, want %q", id, g, want[id])
		}
	}
}

// TestMissingTopic: a topic that does not exist takes the route down
// (unavailable); once it exists the same publisher delivers to it.
func TestMissingTopic(t *testing.T) {
	t.Parallel()
	s, q := clients(t)
	name := sqstest.RandomName("outboxtest-")
	arn := createTopic(t, s, name)
	if _, err := s.DeleteTopic(t.Context(), &sns.DeleteTopicInput{TopicArn: &arn}); err != nil {
		t.Fatal(err)
	}
	p, err := outboxsns.New(newSNS(sqstest.Endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := sqstest.Env(arn, "k", `{}`, nil)
	publishertest.WantClass(t, "a missing topic", sqstest.Publish(t, p, e)[0], publisher.ClassUnavailable, arn, "NotFound")
	if again := createTopic(t, s, name); again != arn {
		t.Fatalf("recreated topic %s, want %s", again, arn)
	}
	url := subscribedQueue(t, s, q, arn, true)
	sqstest.PublishOK(t, p, e)
	if m, err := outboxsqs.Decode(sqstest.NewReader(q).Read(t, url, 1, 20*time.Second)[0]); err != nil || m.ID != e.ID {
		t.Fatalf("arrived %+v, %v", m, err)
	}
}

// TestRefusedBeforeSending: a message over 256 KiB and a destination that
// is no topic ARN are dead with the reason; the rest of the batch goes.
func TestRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	s, q := clients(t)
	arn := createTopic(t, s, sqstest.RandomName("outboxtest-"))
	url := subscribedQueue(t, s, q, arn, true)
	p, err := outboxsns.New(newSNS(sqstest.Endpoint), nil)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 200<<10)
	batch := []*publisher.Envelope{sqstest.Env(arn, "a", `"`+big+`"`, nil), sqstest.Env(arn, "b", strings.Repeat("y", 262144), nil), sqstest.Env("orders", "c", `1`, nil), sqstest.Env(arn, "d", `"`+big+`"`, nil)}
	errs := sqstest.Publish(t, p, batch...)
	if errs[0] != nil || errs[3] != nil {
		t.Fatalf("results %v", errs)
	}
	publishertest.WantClass(t, "a message over 256 KiB", errs[1], publisher.ClassPermanent, "message too large", "SNS takes at most 262144")
	publishertest.WantClass(t, "no topic ARN", errs[2], publisher.ClassPermanent, "not a topic ARN")
	sqstest.NewReader(q).Read(t, url, 2, 20*time.Second)
}

// TestOpenURL opens each URL form with the SDK's default chain (test
// credentials in the environment) and delivers through it.
func TestOpenURL(t *testing.T) {
	s, q := clients(t)
	sqstest.SetSDKEnv(t, "sns")
	arn := createTopic(t, s, sqstest.RandomName("outboxtest-"))
	queue := subscribedQueue(t, s, q, arn, true)
	r := sqstest.NewReader(q)
	qs := url.Values{"endpoint": {sqstest.Endpoint}}.Encode()
	ce, _ := outboxce.Parse(outboxce.FormatBinary, "")
	n := 0
	for _, tc := range []struct {
		url, dest string
		ce        *outboxce.Format
	}{
		{"sns:" + arn + "?" + qs, "ignored", nil}, // region from the ARN
		{"sns:///" + arn + "?" + qs, "ignored", nil},
		{"sns://?region=" + sqstest.Region + "&" + qs, arn, nil}, // the destination is the ARN
		{"sns:" + arn + "?" + qs, "ignored", ce},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		p, err := outboxsns.OpenURL(u, tc.ce, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		e := sqstest.Env(tc.dest, "k", `{}`, nil)
		sqstest.PublishOK(t, p, e)
		_ = p.Close()
		n++
		got := r.Read(t, queue, n, 20*time.Second)
		m, err := outboxsqs.Decode(got[n-1])
		if err != nil || m.ID != e.ID {
			t.Errorf("%s: arrived %+v, %v; want %s", tc.url, m, err, e.ID)
		}
		if tc.ce != nil && aws.ToString(got[n-1].MessageAttributes["ce-id"].StringValue) != e.ID {
			t.Errorf("%s: no ce-id attribute", tc.url)
		}
	}
	for raw, says := range map[string]string{
		"sns://?foo=1":                            `unknown parameter "foo"`,
		"sns:arn:aws:sqs:us-east-1:1:q":           "not a topic ARN",
		"sns://host/x":                            "write the topic ARN as",
		"sns:///arn:aws:sns:r:1:a.b":              "only letters",
		"sns://?endpoint=localhost":               "not an http(s) URL",
		"sns://key:secret@?region=x":              "credentials do not go in the URL",
		"sns:arn:aws:sns:r:1:t?region=a&region=b": "given 2 times",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := outboxsns.OpenURL(u, nil, nil); err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v, want an error saying %q", raw, err, says)
		}
	}
	if _, err := url.Parse("sns://" + arn); err == nil {
		t.Error("sns://arn:… parses as a URL; the docs say it does not")
	}
}

// The local server never throttles or denies, so the classification of
// those answers is checked with an http.RoundTripper under the real SDK
// client that answers PublishBatch as SNS does (query protocol, XML).
type xmlAnswer struct {
	status int
	body   string
}

type fake struct {
	a func(form url.Values) xmlAnswer
}

func (f fake) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(b))
	a := f.a(form)
	return &http.Response{StatusCode: a.status, Header: http.Header{"Content-Type": {"text/xml"}}, Body: io.NopCloser(strings.NewReader(a.body)), ContentLength: int64(len(a.body)), Request: r}, nil
}

func errorXML(typ, code, msg string) string {
	return `<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>` + typ + `</Type><Code>` + code + `</Code><Message>` + msg + `</Message></Error><RequestId>r-1</RequestId></ErrorResponse>`
}

func faked(t *testing.T, a func(url.Values) xmlAnswer) *outboxsns.Publisher {
	c := newSNS("http://127.0.0.1:1", func(o *sns.Options) { o.HTTPClient = &http.Client{Transport: fake{a}}; o.RetryMaxAttempts = 1 })
	p, err := outboxsns.New(c, &outboxsns.Config{TopicARN: "arn:aws:sns:us-east-1:123456789012:orders"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClassification: throttling holds the route, a missing topic or a
// refused authorization takes it down, an internal error may have
// published (unknown); per-entry failures are mapped by entry id.
func TestClassification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		a     xmlAnswer
		class publisher.ErrorClass
		wait  time.Duration
		says  string
	}{
		{"Throttled", xmlAnswer{400, errorXML("Sender", "Throttled", "Rate exceeded")}, publisher.ClassTransient, time.Second, "Rate exceeded"},
		{"KMSThrottling", xmlAnswer{400, errorXML("Sender", "KMSThrottling", "KMS rate exceeded")}, publisher.ClassTransient, time.Second, "KMS"},
		{"NotFound", xmlAnswer{404, errorXML("Sender", "NotFound", "Topic does not exist")}, publisher.ClassUnavailable, 0, "does not exist"},
		{"AuthorizationError", xmlAnswer{403, errorXML("Sender", "AuthorizationError", "User is not authorized to perform: SNS:Publish")}, publisher.ClassUnavailable, 0, "not authorized"},
		{"InvalidClientTokenId", xmlAnswer{403, errorXML("Sender", "InvalidClientTokenId", "The security token included in the request is invalid.")}, publisher.ClassUnavailable, 0, "security token"},
		{"InternalError", xmlAnswer{500, errorXML("Receiver", "InternalError", "internal failure")}, publisher.ClassUnknown, 0, "internal failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := faked(t, func(url.Values) xmlAnswer { return tc.a })
			for _, err := range sqstest.Publish(t, p, sqstest.Env("x", "a", `1`, nil), sqstest.Env("x", "b", `2`, nil)) {
				sqstest.WantClass(t, tc.name, err, tc.class, tc.wait, tc.says)
			}
		})
	}

	p := faked(t, func(form url.Values) xmlAnswer {
		var ok, failed string
		for i := 1; form.Get(fmt.Sprintf("PublishBatchRequestEntries.member.%d.Id", i)) != ""; i++ {
			id := form.Get(fmt.Sprintf("PublishBatchRequestEntries.member.%d.Id", i))
			switch form.Get(fmt.Sprintf("PublishBatchRequestEntries.member.%d.Message", i)) {
			case `"throttled"`:
				failed += `<member><Id>` + id + `</Id><Code>Throttled</Code><SenderFault>true</SenderFault><Message>slow down</Message></member>`
			case `"invalid"`:
				failed += `<member><Id>` + id + `</Id><Code>InvalidParameter</Code><SenderFault>true</SenderFault><Message>bad attribute</Message></member>`
			case `"internal"`:
				failed += `<member><Id>` + id + `</Id><Code>InternalError</Code><SenderFault>false</SenderFault><Message>try again</Message></member>`
			case `"lost"`:
			default:
				ok += `<member><Id>` + id + `</Id><MessageId>m-` + id + `</MessageId></member>`
			}
		}
		return xmlAnswer{200, `<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishBatchResult><Successful>` + ok + `</Successful><Failed>` + failed + `</Failed></PublishBatchResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></PublishBatchResponse>`}
	})
	errs := sqstest.Publish(t, p, sqstest.Env("x", "a", `"ok"`, nil), sqstest.Env("x", "b", `"throttled"`, nil), sqstest.Env("x", "c", `"invalid"`, nil), sqstest.Env("x", "d", `"internal"`, nil), sqstest.Env("x", "e", `"lost"`, nil))
	if errs[0] != nil {
		t.Errorf("published entry: %v", errs[0])
	}
	publishertest.WantClass(t, "throttled entry", errs[1], publisher.ClassTransient, "Throttled")
	if publisher.RetryAfterOf(errs[1]) != time.Second {
		t.Errorf("throttled entry: RetryAfter %v", publisher.RetryAfterOf(errs[1]))
	}
	publishertest.WantClass(t, "invalid entry", errs[2], publisher.ClassPermanent, "InvalidParameter", "bad attribute")
	publishertest.WantClass(t, "service-side failure", errs[3], publisher.ClassTransient, "InternalError")
	publishertest.WantClass(t, "entry not in the answer", errs[4], publisher.ClassUnknown, "answered nothing")
}
