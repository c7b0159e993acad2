package outboxsns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/txoutbox/outbox/publisher"
)

// DefaultThrottleWait is how long the route is held after the service
// throttled a call; AWS answers give no wait of their own.
const DefaultThrottleWait = time.Second

// kind is what an SNS error code means for the route.
type kind int

const (
	kindOther       kind = iota // the message's fault when the sender's, else transient
	kindThrottled               // the service asked for a pause
	kindUnavailable             // the topic cannot be reached: missing, denied, bad credentials, its KMS key unusable
)

// codeKinds are the error codes that say something about the route.
var codeKinds = map[string]kind{
	"Throttled":                   kindThrottled,
	"Throttling":                  kindThrottled,
	"ThrottlingException":         kindThrottled,
	"ThrottledException":          kindThrottled,
	"TooManyRequestsException":    kindThrottled,
	"RequestLimitExceeded":        kindThrottled,
	"KMSThrottling":               kindThrottled,
	"ServiceUnavailable":          kindThrottled,
	"NotFound":                    kindUnavailable,
	"AuthorizationError":          kindUnavailable,
	"AccessDenied":                kindUnavailable,
	"AccessDeniedException":       kindUnavailable,
	"InvalidClientTokenId":        kindUnavailable,
	"UnrecognizedClientException": kindUnavailable,
	"SignatureDoesNotMatch":       kindUnavailable,
	"IncompleteSignature":         kindUnavailable,
	"MissingAuthenticationToken":  kindUnavailable,
	"ExpiredToken":                kindUnavailable,
	"ExpiredTokenException":       kindUnavailable,
	"OptInRequired":               kindUnavailable,
	"InvalidSecurity":             kindUnavailable,
	"KMSAccessDenied":             kindUnavailable,
	"KMSDisabled":                 kindUnavailable,
	"KMSInvalidState":             kindUnavailable,
	"KMSNotFound":                 kindUnavailable,
	"KMSOptInRequired":            kindUnavailable,
}

func kindOf(code string) kind { return codeKinds[code] }

// missingTopic reports whether err says the topic does not exist.
func missingTopic(err error) bool {
	var nf *types.NotFoundException
	return errors.As(err, &nf)
}

// entryError classifies a failed entry of a PublishBatch answer.
func (p *Publisher) entryError(topic, code, msg string, senderFault bool) error {
	err := fmt.Errorf("outboxsns: topic %s: %s: %s", topic, code, oneLine(msg))
	switch kindOf(code) {
	case kindThrottled:
		return publisher.RetryAfter(err, p.throttleWait)
	case kindUnavailable:
		return publisher.Unavailable(err)
	}
	if senderFault {
		return publisher.Permanent(err)
	}
	return err
}

// callFailure is how a whole call failed.
type callFailure int

const (
	failRoute    callFailure = iota // classified for the route: every message gets the error
	failMessages                    // a client-side fault of an unclassified kind: one of the messages may be at fault
)

// callError classifies the error of a whole PublishBatch; sent says
// whether the request reached the transport.
func (p *Publisher) callError(ctx context.Context, what string, err error, sent bool) (callFailure, error) {
	msg := fmt.Sprintf("outboxsns: %s: %s", what, oneLine(err.Error()))
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if missingTopic(err) {
			return failRoute, publisher.Unavailable(errors.New(msg))
		}
		switch kindOf(ae.ErrorCode()) {
		case kindThrottled:
			return failRoute, publisher.RetryAfter(errors.New(msg), p.throttleWait)
		case kindUnavailable:
			return failRoute, publisher.Unavailable(errors.New(msg))
		}
		var re *awshttp.ResponseError
		if (errors.As(err, &re) && re.HTTPStatusCode() >= 500) || ae.ErrorFault() == smithy.FaultServer {
			// The service failed while handling it: it may have published it.
			return failRoute, publisher.Unknown(errors.New(msg))
		}
		return failMessages, errors.New(msg)
	}
	if !sent {
		if ctx.Err() != nil {
			return failRoute, fmt.Errorf("outboxsns: %s: not sent: %v", what, ctx.Err())
		}
		// Credentials or the endpoint could not be had: nothing was sent.
		return failRoute, publisher.Unavailable(errors.New(msg))
	}
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) {
		var op *net.OpError
		var dns *net.DNSError
		if (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns) {
			return failRoute, publisher.Unavailable(errors.New(msg))
		}
	}
	// The request went out and no answer says what became of it.
	return failRoute, publisher.Unknown(errors.New(msg))
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
