package outboxkinesis_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/outboxkinesis"
	"github.com/txoutbox/outbox/publisher/outboxurl"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// The tests run against a local Kinesis server (kinesalite, started by
// scripts/emulators/kinesalite.sh) at OUTBOX_TEST_KINESIS_ENDPOINT.
var endpoint = testdb.Env("OUTBOX_TEST_KINESIS_ENDPOINT", "http://127.0.0.1:14567")

const region = "us-east-1"

// quiet is the logger of the consumers under test: their warnings about
// the failures the tests make on purpose are not news.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMain(m *testing.M) {
	// OpenURL takes its credentials from the SDK's default chain; the
	// local server accepts any.
	os.Setenv("AWS_ACCESS_KEY_ID", "test")
	os.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	os.Unsetenv("AWS_PROFILE")
	outboxurl.Register(outboxurl.Scheme{Names: []string{outboxkinesis.Scheme}, Open: outboxkinesis.OpenURL})
	testdb.VerifyNoLeaks(m)
}

// newClient returns a client of the local server with static test
// credentials; rt, when set, carries its requests; attempts 0 keeps the
// SDK's retries.
func newClient(t testing.TB, url string, rt http.RoundTripper, attempts int) *kinesis.Client {
	t.Helper()
	hc := &http.Client{Transport: rt}
	if rt == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		t.Cleanup(tr.CloseIdleConnections)
		hc.Transport = tr
	}
	return kinesis.New(kinesis.Options{
		Region:           region,
		BaseEndpoint:     aws.String(url),
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:       hc,
		RetryMaxAttempts: attempts,
	})
}

var (
	reachOnce sync.Once
	reachErr  error
)

// local returns a client of the local server, failing the test under CI
// and skipping it elsewhere when the server does not answer.
func local(t testing.TB) *kinesis.Client {
	t.Helper()
	c := newClient(t, endpoint, nil, 1)
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, reachErr = c.ListStreams(ctx, &kinesis.ListStreamsInput{})
	})
	if reachErr != nil {
		testdb.Unavailable(t, "the local Kinesis server at "+endpoint+" (scripts/emulators/kinesalite.sh)", reachErr)
	}
	return newClient(t, endpoint, nil, 0)
}

// newStream creates a stream of the given shards and waits until it is
// ACTIVE; it is deleted at cleanup.
func newStream(t testing.TB, c *kinesis.Client, shards int32) string {
	t.Helper()
	name := testdb.RandomName("outboxtest_")
	createStream(t, c, name, shards)
	return name
}

func createStream(t testing.TB, c *kinesis.Client, name string, shards int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(name)})
	})
	w := kinesis.NewStreamExistsWaiter(c, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
		o.MaxDelay = 200 * time.Millisecond
	})
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatalf("stream %s not ACTIVE: %v", name, err)
	}
}

// readAll reads every record of the stream, shard after shard, each
// shard from its oldest record to its tip, ordered by arrival time (a
// shard's records keep their order).
func readAll(t testing.TB, c *kinesis.Client, stream string) []types.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shards, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatalf("list shards of %s: %v", stream, err)
	}
	var out []types.Record
	for _, s := range shards.Shards {
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatalf("shard iterator of %s/%s: %v", stream, *s.ShardId, err)
		}
		iter := it.ShardIterator
		for iter != nil {
			r, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatalf("get records of %s/%s: %v", stream, *s.ShardId, err)
			}
			out = append(out, r.Records...)
			if len(r.Records) == 0 {
				break
			}
			iter = r.NextShardIterator
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].ApproximateArrivalTimestamp.Before(*out[j].ApproximateArrivalTimestamp)
	})
	return out
}

// waitRecords reads the stream until it holds at least n records,
// failing the test if they do not come within d.
func waitRecords(t testing.TB, c *kinesis.Client, stream string, n int, d time.Duration) []types.Record {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		rs := readAll(t, c, stream)
		if len(rs) >= n {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s holds %d records after %v, want %d", stream, len(rs), d, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// received is a record as the conformance suite sees it, read with
// Decode.
func received(t testing.TB, stream string, r types.Record) publishertest.Received {
	t.Helper()
	m, err := outboxkinesis.Decode(r)
	if err != nil {
		t.Fatalf("decode a record of %s: %v", stream, err)
	}
	return publishertest.Received{ID: m.ID, Key: m.Key, Topic: m.Topic, Destination: stream, Payload: m.Payload, Headers: m.Headers}
}

// injector carries a client's requests to the local server and makes
// the service's failures that the server never returns: per record of a
// PutRecords call (the record is taken out of the request, so it is not
// stored, and its answer gets the error code) or for a whole call.
type injector struct {
	next http.RoundTripper

	mu sync.Mutex
	// record returns the ErrorCode to answer for a record ("" to send
	// it), given its partition key and data.
	record func(pk string, data []byte) string
	// call, when it returns a status, answers the PutRecords call of
	// the partition keys with it and body instead of sending it.
	call func(keys []string) (status int, body string)
	// calls are the PutRecords requests seen: each one's partition keys.
	calls [][]string
}

func newInjector(t testing.TB) *injector {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &injector{next: tr}
}

type putRecordsBody struct {
	StreamName string `json:"StreamName,omitempty"`
	StreamARN  string `json:"StreamARN,omitempty"`
	Records    []struct {
		Data         string `json:"Data"`
		PartitionKey string `json:"PartitionKey"`
	} `json:"Records"`
}

type putRecordsAnswer struct {
	FailedRecordCount int              `json:"FailedRecordCount"`
	Records           []map[string]any `json:"Records"`
}

func (in *injector) Calls() [][]string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([][]string(nil), in.calls...)
}

func (in *injector) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".PutRecords") {
		return in.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	_ = req.Body.Close()
	var put putRecordsBody
	if err := json.Unmarshal(body, &put); err != nil {
		return nil, fmt.Errorf("injector: PutRecords body: %v", err)
	}
	in.mu.Lock()
	var keys []string
	for _, r := range put.Records {
		keys = append(keys, r.PartitionKey)
	}
	in.calls = append(in.calls, keys)
	call, record := in.call, in.record
	in.mu.Unlock()
	if call != nil {
		if status, b := call(keys); status != 0 {
			return answer(req, status, []byte(b)), nil
		}
	}
	codes := make([]string, len(put.Records))
	send := put
	send.Records = send.Records[:0:0]
	for i, r := range put.Records {
		if record != nil {
			data, _ := base64.StdEncoding.DecodeString(r.Data)
			codes[i] = record(r.PartitionKey, data)
		}
		if codes[i] == "" {
			send.Records = append(send.Records, r)
		}
	}
	var got putRecordsAnswer
	if len(send.Records) > 0 {
		b, _ := json.Marshal(send)
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.ContentLength = int64(len(b))
		req.Header.Del("Content-Length")
		resp, err := in.next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		rb, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return answer(req, resp.StatusCode, rb), nil
		}
		if err := json.Unmarshal(rb, &got); err != nil {
			return nil, fmt.Errorf("injector: PutRecords answer: %v", err)
		}
	}
	out := putRecordsAnswer{FailedRecordCount: got.FailedRecordCount}
	j := 0
	for _, code := range codes {
		if code == "" {
			out.Records = append(out.Records, got.Records[j])
			j++
			continue
		}
		out.FailedRecordCount++
		msg := "Internal service failure."
		if code == outboxkinesis.CodeThroughputExceeded {
			msg = "Rate exceeded for shard shardId-000000000000 in stream " + put.StreamName + " under account 000000000000."
		}
		out.Records = append(out.Records, map[string]any{"ErrorCode": code, "ErrorMessage": msg})
	}
	b, _ := json.Marshal(out)
	return answer(req, http.StatusOK, b), nil
}

// answer is a response of the service to req.
func answer(req *http.Request, status int, body []byte) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.1"}, "X-Amzn-Requestid": {"injected"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
