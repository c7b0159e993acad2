package awswire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/txoutbox/outbox/publisher"
)

// Kind is what an error code of the service means for the route.
type Kind int

// The kinds of error codes.
const (
	// KindOther: the message's fault when the sender's, else transient.
	KindOther Kind = iota
	// KindThrottled: the service asked for a pause.
	KindThrottled
	// KindUnavailable: the destination cannot be reached: missing,
	// denied, bad credentials, its KMS key unusable.
	KindUnavailable
)

// commonKinds are the error codes every AWS service may answer that say
// something about the route: throttling, and refused access or
// credentials.
var commonKinds = map[string]Kind{
	"Throttling":                  KindThrottled,
	"ThrottlingException":         KindThrottled,
	"ThrottledException":          KindThrottled,
	"TooManyRequestsException":    KindThrottled,
	"RequestLimitExceeded":        KindThrottled,
	"ServiceUnavailable":          KindThrottled,
	"AccessDenied":                KindUnavailable,
	"AccessDeniedException":       KindUnavailable,
	"InvalidClientTokenId":        KindUnavailable,
	"UnrecognizedClientException": KindUnavailable,
	"SignatureDoesNotMatch":       KindUnavailable,
	"IncompleteSignature":         KindUnavailable,
	"MissingAuthenticationToken":  KindUnavailable,
	"ExpiredToken":                KindUnavailable,
	"ExpiredTokenException":       KindUnavailable,
	"OptInRequired":               KindUnavailable,
	"InvalidSecurity":             KindUnavailable,
}

// KindOf is what code means for the route: its kind in own, the codes of
// one service, or else among the codes every AWS service may answer;
// KindOther when it says nothing about it.
func KindOf(code string, own map[string]Kind) Kind {
	if k, ok := own[code]; ok {
		return k
	}
	return commonKinds[code]
}

// entryError classifies a failed entry of a batch answer to dest.
func (b *Batcher) entryError(dest string, f Failed) error {
	err := fmt.Errorf("%s: %s %s: %s: %s", b.Pkg, b.Dest, dest, f.Code, OneLine(f.Message))
	switch b.Kind(f.Code) {
	case KindThrottled:
		return publisher.RetryAfter(err, b.ThrottleWait)
	case KindUnavailable:
		return publisher.Unavailable(err)
	}
	if f.SenderFault {
		return publisher.Permanent(err)
	}
	// The service failed to take it: try again.
	return err
}

// Failure is how a whole call failed.
type Failure int

// The ways a whole call fails.
const (
	// FailRoute: classified for the route; every message gets the error.
	FailRoute Failure = iota
	// FailMessages: a client-side fault of an unclassified kind; one of
	// the messages may be at fault.
	FailMessages
)

// Fault is what the error of a failed call says, as the publisher reads
// it from its SDK's error types.
type Fault struct {
	// Answered: the service answered with an error (smithy.APIError).
	Answered bool
	// Kind is the kind of the answer's error code; KindUnavailable too
	// when the answer says the destination does not exist.
	Kind Kind
	// ServerFault: the service failed while handling the call (an HTTP
	// status of 500 or more, or a server fault).
	ServerFault bool
	// Sent: the request reached the transport.
	Sent bool
	// SendFailed: the HTTP client failed the request
	// (smithyhttp.RequestSendError).
	SendFailed bool
}

// CallError classifies err, the error of a whole call of the publisher
// named by b.Pkg, from what f says of it; what names the call in the
// error ("queue Q: SendMessageBatch").
func (b *Batcher) CallError(ctx context.Context, what string, err error, f Fault) (Failure, error) {
	msg := fmt.Sprintf("%s: %s: %s", b.Pkg, what, OneLine(err.Error()))
	if f.Answered {
		switch f.Kind {
		case KindThrottled:
			return FailRoute, publisher.RetryAfter(errors.New(msg), b.ThrottleWait)
		case KindUnavailable:
			return FailRoute, publisher.Unavailable(errors.New(msg))
		}
		if f.ServerFault {
			// The service failed while handling it: it may have taken it.
			return FailRoute, publisher.Unknown(errors.New(msg))
		}
		return FailMessages, errors.New(msg)
	}
	if !f.Sent {
		if ctx.Err() != nil {
			return FailRoute, fmt.Errorf("%s: %s: not sent: %v", b.Pkg, what, ctx.Err())
		}
		// Credentials or the endpoint could not be had: nothing was sent,
		// and no message can be until the configuration is fixed.
		return FailRoute, publisher.Unavailable(errors.New(msg))
	}
	if f.SendFailed {
		var op *net.OpError
		var dns *net.DNSError
		if (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns) {
			return FailRoute, publisher.Unavailable(errors.New(msg))
		}
	}
	// The request went out and no answer says what became of it: a
	// timeout, a connection lost, an unreadable answer, a cancelled
	// context.
	return FailRoute, publisher.Unknown(errors.New(msg))
}

// OneLine keeps an error message on one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
