package outboxsqs_test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/txoutbox/outbox/internal/testkit/sqstest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// The local servers never throttle, deny access or fail internally, so
// these tests put an http.RoundTripper under the real SDK client that
// answers one operation the way SQS does (status, headers, JSON body of
// the JSON protocol), and check what the publisher makes of the error
// the SDK decodes from it. Nothing here reaches a server.

// answer is a canned SQS answer.
type answer struct {
	status int
	query  string // x-amzn-query-error, "" for none
	body   string
}

// fake answers op with a and any other operation with a failure.
type fake struct {
	t  *testing.T
	op string
	a  func(req map[string]any) answer
}

func (f *fake) RoundTrip(r *http.Request) (*http.Response, error) {
	if target := r.Header.Get("X-Amz-Target"); target != "AmazonSQS."+f.op {
		f.t.Errorf("unexpected call %s", target)
		return nil, io.ErrUnexpectedEOF
	}
	var req map[string]any
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &req)
	a := f.a(req)
	h := http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"00000000-0000-0000-0000-000000000000"}}
	if a.query != "" {
		h.Set("X-Amzn-Query-Error", a.query)
	}
	return &http.Response{StatusCode: a.status, Header: h, Body: io.NopCloser(strings.NewReader(a.body)), ContentLength: int64(len(a.body)), Request: r}, nil
}

func fixed(a answer) func(map[string]any) answer { return func(map[string]any) answer { return a } }

// faked is a publisher over a real SDK client whose transport is f, with
// the SDK's own retries off.
func faked(t *testing.T, op string, a func(map[string]any) answer, cfg *outboxsqs.Config) *outboxsqs.Publisher {
	c := sqstest.NewClient("http://127.0.0.1:1", func(o *sqs.Options) {
		o.HTTPClient = &http.Client{Transport: &fake{t: t, op: op, a: a}}
		o.RetryMaxAttempts = 1
	})
	if cfg == nil {
		cfg = &outboxsqs.Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/orders"}
	}
	p, err := outboxsqs.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCallErrors: the whole SendMessageBatch refused. Throttling holds
// the route (RetryAfter, the message not charged); access and
// credential refusals and a missing queue take it down; an internal error
// may have stored the messages (unknown).
func TestCallErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		a     answer
		class publisher.ErrorClass
		wait  time.Duration
		says  string
	}{
		{"RequestThrottled", answer{403, "RequestThrottled;Sender", `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Request is throttled."}`}, publisher.ClassTransient, time.Second, "RequestThrottled"},
		{"ThrottlingException", answer{400, "", `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate exceeded"}`}, publisher.ClassTransient, time.Second, "Rate exceeded"},
		{"KmsThrottled", answer{400, "KMS.ThrottlingException;Sender", `{"__type":"com.amazonaws.sqs#KmsThrottled","message":"KMS throttled"}`}, publisher.ClassTransient, time.Second, "KMS"},
		{"AccessDenied", answer{403, "AccessDenied;Sender", `{"__type":"com.amazon.coral.service#AccessDeniedException","message":"User is not authorized to perform: sqs:sendmessage"}`}, publisher.ClassUnavailable, 0, "not authorized"},
		{"InvalidClientTokenId", answer{403, "InvalidClientTokenId;Sender", `{"__type":"com.amazon.coral.service#UnrecognizedClientException","message":"The security token included in the request is invalid."}`}, publisher.ClassUnavailable, 0, "security token"},
		{"QueueDoesNotExist", answer{400, "AWS.SimpleQueueService.NonExistentQueue;Sender", `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`}, publisher.ClassUnavailable, 0, "does not exist"},
		{"KmsAccessDenied", answer{400, "KMS.AccessDeniedException;Sender", `{"__type":"com.amazonaws.sqs#KmsAccessDenied","message":"no access to the key"}`}, publisher.ClassUnavailable, 0, "key"},
		{"InternalError", answer{500, "InternalError;Receiver", `{"__type":"com.amazonaws.sqs#InternalError","message":"We encountered an internal error."}`}, publisher.ClassUnknown, 0, "internal error"},
		{"ServiceUnavailable", answer{503, "ServiceUnavailable;Receiver", `{"__type":"com.amazonaws.sqs#ServiceUnavailable","message":"Service is unavailable."}`}, publisher.ClassTransient, time.Second, "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := faked(t, "SendMessageBatch", fixed(tc.a), nil)
			errs := sqstest.Publish(t, p, sqstest.Env("orders", "a", `1`, nil), sqstest.Env("orders", "b", `2`, nil))
			for _, err := range errs {
				sqstest.WantClass(t, tc.name, err, tc.class, tc.wait, tc.says)
			}
		})
	}
}

// TestCallRefusedFindsTheMessage: a batch call refused for a reason the
// service gives no entry for is made again one message per call, so the
// message at fault goes dead and the others are confirmed.
func TestCallRefusedFindsTheMessage(t *testing.T) {
	t.Parallel()
	calls := 0
	p := faked(t, "SendMessageBatch", func(req map[string]any) answer {
		calls++
		entries := req["Entries"].([]any)
		for _, e := range entries {
			if strings.Contains(e.(map[string]any)["MessageBody"].(string), "bad") {
				return answer{400, "InvalidParameterValue;Sender", `{"__type":"com.amazonaws.sqs#InvalidParameterValue","message":"Value for parameter is invalid."}`}
			}
		}
		return success(entries, nil)
	}, nil)
	errs := sqstest.Publish(t, p, sqstest.Env("orders", "a", `"ok"`, nil), sqstest.Env("orders", "b", `"bad"`, nil), sqstest.Env("orders", "c", `"ok"`, nil))
	if errs[0] != nil || errs[2] != nil || calls != 4 {
		t.Fatalf("results %v after %d calls, want the good ones confirmed after 1+3", errs, calls)
	}
	publishertest.WantClass(t, "the refused message", errs[1], publisher.ClassPermanent, "InvalidParameterValue")
}

// TestEntryErrors: per-entry failures of one SendMessageBatch answer,
// each mapped to its envelope by entry id: a sender-fault failure is the
// message's (dead), unless its code is throttling (held) or about the
// queue's KMS key (down); a service-side failure is retried; an entry the
// answer says nothing about may have been stored (unknown).
func TestEntryErrors(t *testing.T) {
	t.Parallel()
	failed := map[string]string{ // body → failure
		`"throttled"`: `{"Code":"RequestThrottled","SenderFault":true,"Message":"throttled"}`,
		`"invalid"`:   `{"Code":"InvalidMessageContents","SenderFault":true,"Message":"Invalid characters found."}`,
		`"internal"`:  `{"Code":"InternalError","SenderFault":false,"Message":"internal failure"}`,
		`"kms"`:       `{"Code":"KmsDisabled","SenderFault":true,"Message":"key disabled"}`,
	}
	p := faked(t, "SendMessageBatch", func(req map[string]any) answer {
		return success(req["Entries"].([]any), failed)
	}, nil)
	batch := []*publisher.Envelope{
		sqstest.Env("orders", "a", `"ok"`, nil), sqstest.Env("orders", "b", `"throttled"`, nil), sqstest.Env("orders", "c", `"invalid"`, nil),
		sqstest.Env("orders", "d", `"internal"`, nil), sqstest.Env("orders", "e", `"kms"`, nil), sqstest.Env("orders", "f", `"lost"`, nil),
	}
	errs := sqstest.Publish(t, p, batch...)
	if errs[0] != nil {
		t.Errorf("confirmed entry: %v", errs[0])
	}
	publishertest.WantClass(t, "throttled entry", errs[1], publisher.ClassTransient, "RequestThrottled")
	if publisher.RetryAfterOf(errs[1]) != time.Second {
		t.Errorf("throttled entry: RetryAfter %v", publisher.RetryAfterOf(errs[1]))
	}
	publishertest.WantClass(t, "invalid entry", errs[2], publisher.ClassPermanent, "InvalidMessageContents", "Invalid characters")
	publishertest.WantClass(t, "service-side failure", errs[3], publisher.ClassTransient, "InternalError")
	if publisher.RetryAfterOf(errs[3]) != 0 {
		t.Errorf("service-side failure: RetryAfter %v", publisher.RetryAfterOf(errs[3]))
	}
	publishertest.WantClass(t, "KMS key disabled", errs[4], publisher.ClassUnavailable, "KmsDisabled")
	publishertest.WantClass(t, "entry not in the answer", errs[5], publisher.ClassUnknown, "answered nothing")
}

// TestGetQueueUrlErrors: resolving a queue name that SQS throttles holds
// the route; a denied one takes it down.
func TestGetQueueUrlErrors(t *testing.T) {
	t.Parallel()
	throttled := faked(t, "GetQueueUrl", fixed(answer{403, "RequestThrottled;Sender", `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Request is throttled."}`}), &outboxsqs.Config{})
	err := sqstest.Publish(t, throttled, sqstest.Env("orders", "a", `1`, nil))[0]
	publishertest.WantClass(t, "GetQueueUrl throttled", err, publisher.ClassTransient, "GetQueueUrl")
	if publisher.RetryAfterOf(err) != time.Second {
		t.Errorf("RetryAfter %v", publisher.RetryAfterOf(err))
	}
	denied := faked(t, "GetQueueUrl", fixed(answer{400, "AccessDenied;Sender", `{"__type":"com.amazon.coral.service#AccessDeniedException","message":"not authorized to perform: sqs:getqueueurl"}`}), &outboxsqs.Config{})
	publishertest.WantClass(t, "GetQueueUrl denied", sqstest.Publish(t, denied, sqstest.Env("orders", "a", `1`, nil))[0], publisher.ClassUnavailable, "not authorized")
}

// success is a SendMessageBatch answer: the entries whose body is in
// failed fail with that entry, the one with body "lost" is left out, the
// others are stored (with the body's MD5, which the SDK checks).
func success(entries []any, failed map[string]string) answer {
	var ok, bad []string
	for _, e := range entries {
		m := e.(map[string]any)
		id, body := m["Id"].(string), m["MessageBody"].(string)
		if f, is := failed[body]; is {
			bad = append(bad, strings.Replace(f, "{", `{"Id":"`+id+`",`, 1))
			continue
		}
		if body == `"lost"` {
			continue
		}
		sum := md5.Sum([]byte(body))
		ok = append(ok, `{"Id":"`+id+`","MessageId":"m-`+id+`","MD5OfMessageBody":"`+hex.EncodeToString(sum[:])+`"}`)
	}
	var b bytes.Buffer
	b.WriteString(`{"Successful":[` + strings.Join(ok, ",") + `],"Failed":[` + strings.Join(bad, ",") + `]}`)
	return answer{200, "", b.String()}
}
