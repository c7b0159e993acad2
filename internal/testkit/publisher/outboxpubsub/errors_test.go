package outboxpubsub_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxpubsub"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestMissingTopic: a topic that does not exist takes the route down
// (NOT_FOUND is unavailable, never the message's fault); once the topic
// is created the same publisher delivers the message.
func TestMissingTopic(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	p := newPublisher(t, c, nil)
	topic := randomID("missing-")
	env := envelope(topic, "k", `{"n":1}`)
	errs := publish(t, p, env)
	publishertest.WantClass(t, "publish to a missing topic", errs[0], publisher.ClassUnavailable, "topic not found", topic)
	var st interface{ GRPCStatus() *status.Status }
	if !errors.As(errs[0], &st) || st.GRPCStatus().Code() != codes.NotFound {
		t.Fatalf("error %v does not unwrap to the NOT_FOUND status", errs[0])
	}
	createTopic(t, c, topic)
	if errs := publish(t, p, env); errs[0] != nil {
		t.Fatalf("after the topic was created: %v", errs[0])
	}
	if got := stored(t, srv, topic, 1, 10*time.Second); got[0].Attributes[outboxpubsub.AttrMessageID] != env.ID {
		t.Fatalf("stored %v", got[0].Attributes)
	}
}

// TestStatusClasses answers the Publish RPC with each gRPC status the
// service uses and checks the class the relay gets. pstest never
// throttles or denies access, so a reactor on the server answers with
// the status instead; the client in between is the real one, made with
// ClientConfig.
func TestStatusClasses(t *testing.T) {
	t.Parallel()
	throttledWithDelay, err := status.New(codes.ResourceExhausted, "quota exceeded").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(7 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		err      error
		class    publisher.ErrorClass
		retry    time.Duration
		contains []string
	}{
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "publish quota exceeded"), publisher.ClassTransient, 250 * time.Millisecond, []string{"throttled", "RESOURCE_EXHAUSTED"}},
		{"ResourceExhaustedWithRetryInfo", throttledWithDelay.Err(), publisher.ClassTransient, 7 * time.Second, []string{"throttled"}},
		{"PermissionDenied", status.Error(codes.PermissionDenied, "User not authorized to perform this action."), publisher.ClassUnavailable, 0, []string{"access denied", "roles/pubsub.publisher"}},
		{"Unauthenticated", status.Error(codes.Unauthenticated, "Request had invalid authentication credentials."), publisher.ClassUnavailable, 0, []string{"access denied"}},
		{"Unavailable", status.Error(codes.Unavailable, "The service was unable to fulfill your request."), publisher.ClassUnavailable, 0, []string{"unreachable"}},
		{"NotFound", status.Error(codes.NotFound, "Resource not found (resource=orders)."), publisher.ClassUnavailable, 0, []string{"topic not found"}},
		{"InvalidArgument", status.Error(codes.InvalidArgument, "Invalid resource name given."), publisher.ClassPermanent, 0, []string{"message refused", "INVALID_ARGUMENT"}},
		{"DeadlineExceeded", status.Error(codes.DeadlineExceeded, "deadline exceeded"), publisher.ClassUnknown, 0, []string{"may have been published"}},
		{"FailedPrecondition", status.Error(codes.FailedPrecondition, "something else"), publisher.ClassTransient, 0, []string{"FAILED_PRECONDITION"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fail := &failPublish{}
			srv := fakeServer(t, fail.option())
			c := newClient(t, srv.Addr)
			topic := createTopic(t, c, randomID("topic-"))
			p := newPublisher(t, c, &outboxpubsub.Config{ThrottleDelay: 250 * time.Millisecond})
			fail.set(func(*pb.PublishRequest) error { return tc.err })
			errs := publish(t, p, envelope(topic, "k", `1`))
			publishertest.WantClass(t, tc.name, errs[0], tc.class, tc.contains...)
			if got := publisher.RetryAfterOf(errs[0]); got != tc.retry {
				t.Fatalf("retry after %v, want %v", got, tc.retry)
			}
			if n := fail.failed(); n != 1 {
				t.Fatalf("the client sent the request %d times, want once (no retry inside the client)", n)
			}
		})
	}
}

// TestInternalIsRetriedInTheClient: an INTERNAL answer is retried by the
// client (ClientConfig), and the retry delivers the message.
func TestInternalIsRetriedInTheClient(t *testing.T) {
	t.Parallel()
	fail := &failPublish{}
	srv := fakeServer(t, fail.option())
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("topic-"))
	p := newPublisher(t, c, nil)
	failed := false
	fail.set(func(*pb.PublishRequest) error {
		if failed {
			return nil
		}
		failed = true
		return status.Error(codes.Internal, "transient")
	})
	if errs := publish(t, p, envelope(topic, "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if fail.failed() != 1 || len(stored(t, srv, topic, 1, 10*time.Second)) != 1 {
		t.Fatal("want one failed request and the message stored once")
	}
}

// TestMessagesThatCannotBeSent: what Pub/Sub cannot carry is permanent
// with the reason, decided before anything is sent, and the batch's
// other messages are delivered.
func TestMessagesThatCannotBeSent(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("topic-"))
	p := newPublisher(t, c, nil)
	withHeader := func(k, v string) *publisher.Envelope {
		return publishertest.Envelope(topic, "k-"+randomID(""), []byte(`1`), "application/json", map[string]string{k: v})
	}
	tooMany := envelope(topic, "k-many", `1`)
	for i := range outboxpubsub.MaxAttributes {
		tooMany.Headers[fmt.Sprintf("x-h%03d", i)] = "v"
	}
	longKey := envelope(topic, strings.Repeat("k", outboxpubsub.MaxOrderingKeyBytes+1), `1`)
	longKey.Headers[publisher.HeaderBusinessKey] = "short" // only the ordering key is too long
	bad := []struct {
		env      *publisher.Envelope
		contains string
	}{
		{publishertest.Envelope(topic, "k-big", make([]byte, outboxpubsub.MaxRequestBytes), "application/octet-stream", nil), "too large"},
		{withHeader(strings.Repeat("h", outboxpubsub.MaxAttributeKeyBytes+1), "v"), "attribute key at most 256"},
		{withHeader("x-long", strings.Repeat("v", outboxpubsub.MaxAttributeValueBytes+1)), "attribute value at most 1024"},
		{withHeader("goog-thing", "v"), "reserved"},
		{withHeader("x-bytes", "\xff\xfe"), "not UTF-8"},
		{tooMany, "at most 100 attributes"},
		{longKey, "ordering key"},
		{publishertest.Envelope("goog-topic", "k", []byte(`1`), "application/json", nil), "reserved"},
		{publishertest.Envelope("a b", "k", []byte(`1`), "application/json", nil), "invalid topic ID"},
	}
	var batch []*publisher.Envelope
	var want []string // "" for a message that must be delivered
	for i, b := range bad {
		batch = append(batch, b.env)
		want = append(want, b.contains)
		ok := envelope(topic, fmt.Sprintf("good-%d", i), fmt.Sprint(i))
		batch = append(batch, ok)
		want = append(want, "")
	}
	errs := publish(t, p, batch...)
	delivered := 0
	for i, err := range errs {
		if want[i] == "" {
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			delivered++
			continue
		}
		publishertest.WantClass(t, fmt.Sprintf("message %d", i), err, publisher.ClassPermanent, want[i])
	}
	if got := stored(t, srv, topic, delivered, 10*time.Second); len(got) != delivered {
		t.Fatalf("topic holds %d messages, want the %d good ones", len(got), delivered)
	}
}

// TestLimitsAreInclusive: a message exactly at the attribute limits is
// sent, and a producer header named message-id cannot replace the id.
func TestLimitsAreInclusive(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("topic-"))
	p := newPublisher(t, c, nil)
	env := envelope(topic, strings.Repeat("k", outboxpubsub.MaxOrderingKeyBytes), `1`)
	env.Headers[strings.Repeat("h", outboxpubsub.MaxAttributeKeyBytes)] = strings.Repeat("v", outboxpubsub.MaxAttributeValueBytes)
	env.Headers[outboxpubsub.AttrMessageID] = "forged"
	for i := len(env.Headers); i < outboxpubsub.MaxAttributes; i++ {
		env.Headers[fmt.Sprintf("x-h%03d", i)] = "v"
	}
	if errs := publish(t, p, env); errs[0] != nil {
		t.Fatal(errs[0])
	}
	m := stored(t, srv, topic, 1, 10*time.Second)[0]
	if m.Attributes[outboxpubsub.AttrMessageID] != env.ID || len(m.Attributes) != outboxpubsub.MaxAttributes {
		t.Fatalf("message-id %q, %d attributes; want %s and %d", m.Attributes[outboxpubsub.AttrMessageID], len(m.Attributes), env.ID, outboxpubsub.MaxAttributes)
	}
}
