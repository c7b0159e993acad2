package outboxpubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/txoutbox/outbox/publisher"
)

// wrapped is an error with a one-line message of its own that still
// unwraps to the client's error (a gRPC status, an apierror.APIError).
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// classify turns the error of a message's PublishResult into the class
// the relay acts on.
func (p *Publisher) classify(ctx context.Context, env *publisher.Envelope, err error) error {
	name, _ := p.topicOf(env) // it was valid when the message was sent
	wrap := func(format string, args ...any) error {
		return &wrapped{msg: "outboxpubsub: topic " + name + ": " + oneLine(fmt.Sprintf(format, args...)), err: err}
	}
	var paused pubsub.ErrPublishingPaused
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return publisher.Unknown(wrap("no answer before the publish call ended (%v); the client may still deliver the message", err))
	case errors.As(err, &paused):
		// Not sent: an earlier message of its key failed, and the key
		// is held until the relay retries that message.
		return wrap("not sent: an earlier message of ordering key %q failed", paused.OrderingKey)
	case errors.Is(err, pubsub.ErrOversizedMessage):
		return publisher.Permanent(wrap("message too large for a Pub/Sub publish request (%d bytes at most)", int(MaxRequestBytes)))
	case errors.Is(err, pubsub.ErrPublisherStopped):
		return wrap("not sent: the publisher was closed")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return publisher.Unknown(wrap("no answer within the publish timeout (%v)", err))
	}
	st, ok := status.FromError(err)
	if !ok {
		return wrap("%v", err)
	}
	text := fmt.Sprintf("%s: %s", codeName(st.Code()), st.Message())
	switch st.Code() {
	case codes.ResourceExhausted:
		return publisher.RetryAfter(wrap("throttled: %s", text), p.retryDelay(err))
	case codes.NotFound:
		return publisher.Unavailable(wrap("topic not found (%s)", text))
	case codes.PermissionDenied, codes.Unauthenticated:
		return publisher.Unavailable(wrap("access denied (%s); the relay's principal needs roles/pubsub.publisher on the topic", text))
	case codes.Unavailable:
		return publisher.Unavailable(wrap("Pub/Sub unreachable (%s)", text))
	case codes.InvalidArgument:
		return publisher.Permanent(wrap("message refused (%s)", text))
	case codes.DeadlineExceeded, codes.Canceled:
		return publisher.Unknown(wrap("no answer (%s); the message may have been published", text))
	case codes.Internal:
		if strings.Contains(st.Message(), "invalid UTF-8") {
			return publisher.Permanent(wrap("message refused (%s)", text))
		}
	}
	return wrap("%s", text)
}

// retryDelay is the delay a RESOURCE_EXHAUSTED answer asks for in its
// RetryInfo detail, else the configured ThrottleDelay.
func (p *Publisher) retryDelay(err error) time.Duration {
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		if d := ae.Details().RetryInfo.GetRetryDelay(); d != nil && d.AsDuration() > 0 {
			return d.AsDuration()
		}
	}
	if ae, ok := apierror.FromError(err); ok {
		if d := ae.Details().RetryInfo.GetRetryDelay(); d != nil && d.AsDuration() > 0 {
			return d.AsDuration()
		}
	}
	return p.throttleDelay
}

// codeName is a gRPC code as the API documents it (RESOURCE_EXHAUSTED).
func codeName(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
