// Package sqstest is the local SQS and SNS server
// (scripts/emulators/fauxqs.sh) as the tests of outboxsqs and outboxsns
// use it: clients with test credentials, queues deleted at cleanup, a
// reader of what arrives, outboxsqs.Consume running for the crash and
// outage suites, and the checks both publishers' tests make alike. It is
// for tests only.
package sqstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// Endpoint is the local server: OUTBOX_TEST_AWS_ENDPOINT, by default
// http://127.0.0.1:14566.
var Endpoint = getenv("OUTBOX_TEST_AWS_ENDPOINT", "http://127.0.0.1:14566")

// Region is the region the tests' clients sign for.
const Region = "us-east-1"

// Credentials are the static test credentials the local server takes.
var Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")

// RelayEnv is what an `outbox relay` process needs to reach the local
// server: the SDK's default chain finds these credentials, which it
// accepts.
var RelayEnv = []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_PROFILE=", "AWS_EC2_METADATA_DISABLED=true"}

// Quiet is the consumers' logger: a relay killed mid-batch, or a server
// out of reach, makes duplicates and retries that are not news.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// VerifyTestMain runs the tests of m, then fails if goroutines other than
// the HTTP client's idle connections are left.
func VerifyTestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// unavailable fails the test in CI and skips it elsewhere.
func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not reachable (CI=true, so this fails; start it with scripts/emulators/fauxqs.sh): %v", what, err)
	}
	t.Skipf("skipping outside CI: %s is not reachable (start it with scripts/emulators/fauxqs.sh): %v", what, err)
}

var reach sync.Map // what → *reached

type reached struct {
	once sync.Once
	err  error
}

// Reachable skips t (fails it in CI) unless ping succeeded within 5 s.
// ping runs once per what in the test binary; what names the server in
// the message.
func Reachable(t testing.TB, what string, ping func(ctx context.Context) error) {
	t.Helper()
	v, _ := reach.LoadOrStore(what, &reached{})
	r := v.(*reached)
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.err = ping(ctx)
	})
	if r.err != nil {
		unavailable(t, what, r.err)
	}
}

// RandomName is prefix and 12 random hex digits.
func RandomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// NewClient is an SQS client of the SDK for the server at url, with
// static test credentials, and the options opts set.
func NewClient(url string, opts ...func(*sqs.Options)) *sqs.Client {
	return sqs.New(sqs.Options{Region: Region, BaseEndpoint: aws.String(url), Credentials: Credentials}, opts...)
}

// Client is an SQS client of the local server, skipping (failing in CI)
// the test when it does not answer.
func Client(t testing.TB) *sqs.Client {
	t.Helper()
	c := NewClient(Endpoint)
	Reachable(t, "the local SQS server at "+Endpoint, func(ctx context.Context) error {
		_, err := c.ListQueues(ctx, &sqs.ListQueuesInput{})
		return err
	})
	return c
}

// IsFIFO reports whether a queue or topic name (or URL, or ARN) is a
// FIFO one's.
func IsFIFO(name string) bool { return len(name) > 5 && name[len(name)-5:] == ".fifo" }

// CreateQueue creates a queue named name (FIFO when it ends in .fifo) with
// attributes, deleted at cleanup, and returns its URL.
func CreateQueue(t testing.TB, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	a := map[string]string{}
	if IsFIFO(name) {
		a["FifoQueue"] = "true"
	}
	for k, v := range attrs {
		a[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: a})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	return *out.QueueUrl
}

// Reader receives and deletes what arrives at queues, keeping it in
// arrival order, so that the first n of a queue can be asked for again.
type Reader struct {
	c    *sqs.Client
	mu   sync.Mutex
	got  map[string][]types.Message
	seen map[string]bool // SQS message ids
}

// NewReader is a Reader receiving with c.
func NewReader(c *sqs.Client) *Reader {
	return &Reader{c: c, got: map[string][]types.Message{}, seen: map[string]bool{}}
}

// Read returns the first n messages that arrived at the queue at url,
// failing the test if they do not come within d. Messages are received
// with a short visibility timeout: should an answer be lost on the way,
// its messages come back soon (and a copy received twice counts once).
func (r *Reader) Read(t testing.TB, url string, n int, d time.Duration) []types.Message {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	deadline := time.Now().Add(d)
	for len(r.got[url]) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d messages from %s within %v", len(r.got[url]), n, url, d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := r.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 5,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		cancel()
		if err != nil {
			t.Fatalf("receive from %s: %v", url, err)
		}
		for _, m := range out.Messages {
			if !r.seen[aws.ToString(m.MessageId)] {
				r.seen[aws.ToString(m.MessageId)] = true
				r.got[url] = append(r.got[url], m)
			}
			if _, err := r.c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete from %s: %v", url, err)
			}
		}
	}
	return r.got[url][:n]
}

// Arrived is how many messages have arrived at the queue at url so far.
func (r *Reader) Arrived(url string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got[url])
}

// Publish publishes batch within 30 s and returns its results.
func Publish(t testing.TB, p publisher.Publisher, batch ...*publisher.Envelope) []error {
	t.Helper()
	return publishertest.Publish(t, p, 30*time.Second, batch...)
}

// PublishOK publishes batch, failing the test unless every message is
// confirmed.
func PublishOK(t testing.TB, p publisher.Publisher, batch ...*publisher.Envelope) {
	t.Helper()
	for i, err := range Publish(t, p, batch...) {
		if err != nil {
			t.Fatalf("message %d (%s): %v", i, batch[i].ID, err)
		}
	}
}

// Env is an envelope for dest as the relay makes it.
func Env(dest, key, payload string, extra map[string]string) *publisher.Envelope {
	return publishertest.Envelope(dest, key, []byte(payload), "application/json", extra)
}

// WantClass checks that err is of class, with a RetryAfter of wait, and
// says each of says (publishertest.WantClass).
func WantClass(t testing.TB, what string, err error, class publisher.ErrorClass, wait time.Duration, says ...string) {
	t.Helper()
	publishertest.WantClass(t, what, err, class, says...)
	if d := publisher.RetryAfterOf(err); d != wait {
		t.Errorf("%s: RetryAfter %v, want %v", what, d, wait)
	}
}

// SetSDKEnv points the SDK's default chain at test credentials in t's
// environment and nothing else: no config or credentials file, no
// region, no endpoint (AWS_ENDPOINT_URL nor AWS_ENDPOINT_URL_<service>).
func SetSDKEnv(t *testing.T, service string) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_"+strings.ToUpper(service), "")
}

// SetRelayEnv sets RelayEnv in t's environment, which a relay process
// inherits.
func SetRelayEnv(t *testing.T) {
	for _, kv := range RelayEnv {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// RunConformance runs the publisher conformance suite on the standard
// and the FIFO destinations of the local server. target makes the
// publisher, over a client of endpoint, and its destinations (FIFO ones
// when fifo); endpoint is the server behind a fault proxy, so that the
// suite can cut the publisher's connection. The publisher is closed at
// the end of the test.
func RunConformance(t *testing.T, target func(t *testing.T, endpoint string, fifo bool) *publishertest.Target) {
	for _, fifo := range []bool{false, true} {
		name := "Standard"
		if fifo {
			name = "FIFO"
		}
		t.Run(name, func(t *testing.T) {
			publishertest.Run(t, func(t *testing.T) *publishertest.Target {
				proxy, through := Proxy(t)
				tg := target(t, through, fifo)
				t.Cleanup(func() { _ = tg.Publisher.Close() })
				tg.Disconnect = proxy.Disconnect
				tg.Features = publishertest.Features{Keys: true, ArbitraryHeaders: true, Unordered: !fifo}
				return tg
			})
		})
	}
}

// Proxy is a fault proxy in front of the local server, and the endpoint
// through it.
func Proxy(t *testing.T) (*faultproxy.Proxy, string) {
	proxy := faultproxy.Start(t, strings.TrimPrefix(Endpoint, "http://"))
	return proxy, "http://" + proxy.Addr()
}

// Consume runs outboxsqs.Consume with c on the queue at url until the
// test ends, failing the test if it returns an error.
func Consume(t *testing.T, c *sqs.Client, url string, h brokertest.Handler, opts *outboxsqs.ConsumeOptions) {
	relaytest.Go(t, "Consume", 10*time.Second, func(ctx context.Context) error {
		return outboxsqs.Consume(ctx, c, url, h, opts)
	})
}

// Arrivals runs Consume with c on the queue at url (on a client of the
// server itself, not through any proxy) until the test ends, and returns
// what it handed over so far, in order, redeliveries included.
func Arrivals(t *testing.T, c *sqs.Client, url string) func(*testing.T) []publishertest.Received {
	var mu sync.Mutex
	var got []publishertest.Received
	Consume(t, c, url, func(_ context.Context, m *inbox.Message) error {
		mu.Lock()
		got = append(got, publishertest.Received{ID: m.ID, Key: m.Key, Topic: m.Topic, Payload: m.Payload, Headers: m.Headers})
		mu.Unlock()
		return nil
	}, &outboxsqs.ConsumeOptions{WaitTime: time.Second, Logger: Quiet})
	return func(*testing.T) []publishertest.Received {
		mu.Lock()
		defer mu.Unlock()
		return append([]publishertest.Received(nil), got...)
	}
}

// CrashTarget is the local server as the crash tests use it: create
// makes each destination from a fresh name (ending in .fifo when fifo),
// returning it and the URL of the queue its messages reach, which Consume
// reads with c; relayURL is the relay's destination URL.
func CrashTarget(c *sqs.Client, fifo bool, relayURL string, create func(t *testing.T, name string) (dest, queueURL string)) *brokertest.Target {
	var mu sync.Mutex
	queues := map[string]string{}
	return &brokertest.Target{
		Target: publishertest.Target{
			NewDestination: func(t *testing.T) string {
				name := RandomName("outboxcrash-")
				if fifo {
					name += ".fifo"
				}
				dest, u := create(t, name)
				mu.Lock()
				queues[dest] = u
				mu.Unlock()
				return dest
			},
		},
		Consume: func(t *testing.T, dest string, h brokertest.Handler) {
			mu.Lock()
			u := queues[dest]
			mu.Unlock()
			Consume(t, c, u, h, &outboxsqs.ConsumeOptions{WaitTime: time.Second, VisibilityTimeout: 5 * time.Second, Logger: Quiet})
		},
		URL: relayURL,
	}
}

// RunCrashFIFO runs the crash test on a FIFO destination of the target
// newTarget makes, the outbox on d, with the messages over 20 business
// keys (message groups): each message is applied exactly once, and each
// key's messages are first applied in the order they were committed,
// across the kills.
func RunCrashFIFO(t *testing.T, newTarget func(t *testing.T) *brokertest.Target, d store.Dialect) {
	tg := newTarget(t)
	topic := tg.NewDestination(t)
	c := relaytest.NewCrash(t, testdb.New(t, d), topic)
	c.Keys = 20
	tg.Consume(t, topic, c.Handle)
	c.Run(tg.URL, RelayEnv...)
}
