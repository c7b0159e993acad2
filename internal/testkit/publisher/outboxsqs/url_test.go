package outboxsqs_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/txoutbox/outbox/internal/testkit/sqstest"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
)

// TestOpenURL opens each URL form with the SDK's default chain (test
// credentials in the environment) and delivers through it to the local
// server.
func TestOpenURL(t *testing.T) {
	c := sqstest.Client(t)
	sqstest.SetSDKEnv(t, "sqs")
	host := strings.TrimPrefix(sqstest.Endpoint, "http://")
	q := endpointQuery()

	named := sqstest.RandomName("outboxtest-")
	namedURL := sqstest.CreateQueue(t, c, named, nil)
	other := sqstest.RandomName("outboxtest-")
	otherURL := sqstest.CreateQueue(t, c, other, nil)
	account := strings.Split(strings.TrimPrefix(strings.TrimPrefix(namedURL, "http://"), "https://"), "/")[1]
	r := sqstest.NewReader(c)
	for _, tc := range []struct {
		url, dest, arrives string
	}{
		{"sqs://?" + q, other, otherURL},                                           // the destination names the queue
		{"sqs://" + named + "?" + q, other, namedURL},                              // one queue, by name
		{"sqs://" + host + "/" + account + "/" + named + "?" + q, other, namedURL}, // one queue, by URL
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		p, err := outboxsqs.OpenURL(u, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		e := sqstest.Env(tc.dest, "k", `{}`, nil)
		sqstest.PublishOK(t, p, e)
		_ = p.Close()
		got := r.Read(t, tc.arrives, r.Arrived(tc.arrives)+1, 10*time.Second)
		if id := aws.ToString(got[len(got)-1].MessageAttributes["message-id"].StringValue); id != e.ID {
			t.Errorf("%s: arrived %s at %s, want %s", tc.url, id, tc.arrives, e.ID)
		}
	}

	// CloudEvents through the URL.
	ce, _ := outboxce.Parse(outboxce.FormatBinary, "")
	u, _ := url.Parse("sqs://" + named + "?" + q)
	p, err := outboxsqs.OpenURL(u, ce, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e := sqstest.Env(other, "k", `{}`, nil)
	sqstest.PublishOK(t, p, e)
	got := r.Read(t, namedURL, r.Arrived(namedURL)+1, 10*time.Second)
	if m, err := outboxsqs.Decode(got[len(got)-1]); err != nil || m.ID != e.ID || aws.ToString(got[len(got)-1].MessageAttributes["ce-id"].StringValue) != e.ID {
		t.Errorf("CloudEvent via the URL: %+v, %v", m, err)
	}

	// No region anywhere.
	u, _ = url.Parse("sqs://" + named)
	if _, err := outboxsqs.OpenURL(u, nil, nil); err == nil || !strings.Contains(err.Error(), "no AWS region") {
		t.Errorf("without a region: %v", err)
	}
}

func endpointQuery() string {
	return url.Values{"region": {sqstest.Region}, "endpoint": {sqstest.Endpoint}}.Encode()
}
