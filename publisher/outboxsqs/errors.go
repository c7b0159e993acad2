package outboxsqs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/txoutbox/outbox/publisher"
)

// kind is what an SQS error code means for the route.
type kind int

const (
	kindOther       kind = iota // the message's fault when the sender's, else transient
	kindThrottled               // the service asked for a pause
	kindUnavailable             // the queue cannot be reached: missing, denied, bad credentials, its KMS key unusable
)

// codeKinds are the error codes, without the "AWS.SimpleQueueService."
// prefix of the query protocol, that say something about the route.
var codeKinds = map[string]kind{
	"RequestThrottled":             kindThrottled,
	"ThrottlingException":          kindThrottled,
	"Throttling":                   kindThrottled,
	"ThrottledException":           kindThrottled,
	"TooManyRequestsException":     kindThrottled,
	"RequestLimitExceeded":         kindThrottled,
	"KmsThrottled":                 kindThrottled,
	"KMS.ThrottlingException":      kindThrottled,
	"OverLimit":                    kindThrottled,
	"ServiceUnavailable":           kindThrottled,
	"QueueDoesNotExist":            kindUnavailable,
	"NonExistentQueue":             kindUnavailable,
	"QueueDeletedRecently":         kindUnavailable,
	"AccessDenied":                 kindUnavailable,
	"AccessDeniedException":        kindUnavailable,
	"InvalidClientTokenId":         kindUnavailable,
	"UnrecognizedClientException":  kindUnavailable,
	"SignatureDoesNotMatch":        kindUnavailable,
	"IncompleteSignature":          kindUnavailable,
	"MissingAuthenticationToken":   kindUnavailable,
	"ExpiredToken":                 kindUnavailable,
	"ExpiredTokenException":        kindUnavailable,
	"InvalidSecurity":              kindUnavailable,
	"InvalidAddress":               kindUnavailable,
	"OptInRequired":                kindUnavailable,
	"UnsupportedOperation":         kindUnavailable,
	"KmsAccessDenied":              kindUnavailable,
	"KmsDisabled":                  kindUnavailable,
	"KmsInvalidKeyUsage":           kindUnavailable,
	"KmsInvalidState":              kindUnavailable,
	"KmsNotFound":                  kindUnavailable,
	"KmsOptInRequired":             kindUnavailable,
	"KMS.AccessDeniedException":    kindUnavailable,
	"KMS.DisabledException":        kindUnavailable,
	"KMS.InvalidKeyUsageException": kindUnavailable,
	"KMS.InvalidStateException":    kindUnavailable,
	"KMS.NotFoundException":        kindUnavailable,
	"KMS.OptInRequired":            kindUnavailable,
}

// kindOf classifies an error code.
func kindOf(code string) kind {
	return codeKinds[strings.TrimPrefix(code, "AWS.SimpleQueueService.")]
}

// missingQueue reports whether err says the queue does not exist.
func missingQueue(err error) bool {
	var nq *types.QueueDoesNotExist
	if errors.As(err, &nq) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch strings.TrimPrefix(ae.ErrorCode(), "AWS.SimpleQueueService.") {
		case "QueueDoesNotExist", "NonExistentQueue":
			return true
		}
	}
	return false
}

// entryError classifies a failed entry of a SendMessageBatch answer.
func (p *Publisher) entryError(queue string, code, msg string, senderFault bool) error {
	err := fmt.Errorf("outboxsqs: queue %s: %s: %s", queue, code, oneLine(msg))
	switch kindOf(code) {
	case kindThrottled:
		return publisher.RetryAfter(err, p.throttleWait)
	case kindUnavailable:
		return publisher.Unavailable(err)
	}
	if senderFault {
		return publisher.Permanent(err)
	}
	// The service failed to store it: try again.
	return err
}

// callFailure is how a whole call failed.
type callFailure int

const (
	failRoute    callFailure = iota // classified for the route: every message gets the error
	failMessages                    // a client-side fault of an unclassified kind: one of the messages may be at fault
)

// callError classifies the error of a whole call (SendMessageBatch or
// GetQueueUrl); sent says whether the request reached the transport.
func (p *Publisher) callError(ctx context.Context, what string, err error, sent bool) (callFailure, error) {
	msg := fmt.Sprintf("outboxsqs: %s: %s", what, oneLine(err.Error()))
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch kindOf(ae.ErrorCode()) {
		case kindThrottled:
			return failRoute, publisher.RetryAfter(errors.New(msg), p.throttleWait)
		case kindUnavailable:
			return failRoute, publisher.Unavailable(errors.New(msg))
		}
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
			// The service failed while handling it: it may have stored it.
			return failRoute, publisher.Unknown(errors.New(msg))
		}
		if ae.ErrorFault() == smithy.FaultServer {
			return failRoute, publisher.Unknown(errors.New(msg))
		}
		return failMessages, errors.New(msg)
	}
	if !sent {
		if ctx.Err() != nil {
			return failRoute, fmt.Errorf("outboxsqs: %s: not sent: %v", what, ctx.Err())
		}
		// Credentials or the endpoint could not be had: nothing was sent,
		// and no message can be until the configuration is fixed.
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
	// The request went out and no answer says what became of it: a
	// timeout, a connection lost, an unreadable answer, a cancelled
	// context.
	return failRoute, publisher.Unknown(errors.New(msg))
}

// apiError is the service's error answer in err, nil if none.
func apiError(err error) smithy.APIError {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// DefaultThrottleWait is how long the route is held after the service
// throttled a call; AWS answers give no wait of their own.
const DefaultThrottleWait = time.Second
