package outboxsqs

import (
	"context"
	"errors"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/txoutbox/outbox/publisher/internal/awswire"
)

// codeKinds are the SQS error codes, without the "AWS.SimpleQueueService."
// prefix of the query protocol, that say something about the route,
// besides those every AWS service may answer (awswire.KindOf).
var codeKinds = map[string]awswire.Kind{
	"RequestThrottled":             awswire.KindThrottled,
	"KmsThrottled":                 awswire.KindThrottled,
	"KMS.ThrottlingException":      awswire.KindThrottled,
	"OverLimit":                    awswire.KindThrottled,
	"QueueDoesNotExist":            awswire.KindUnavailable,
	"NonExistentQueue":             awswire.KindUnavailable,
	"QueueDeletedRecently":         awswire.KindUnavailable,
	"InvalidAddress":               awswire.KindUnavailable,
	"UnsupportedOperation":         awswire.KindUnavailable,
	"KmsAccessDenied":              awswire.KindUnavailable,
	"KmsDisabled":                  awswire.KindUnavailable,
	"KmsInvalidKeyUsage":           awswire.KindUnavailable,
	"KmsInvalidState":              awswire.KindUnavailable,
	"KmsNotFound":                  awswire.KindUnavailable,
	"KmsOptInRequired":             awswire.KindUnavailable,
	"KMS.AccessDeniedException":    awswire.KindUnavailable,
	"KMS.DisabledException":        awswire.KindUnavailable,
	"KMS.InvalidKeyUsageException": awswire.KindUnavailable,
	"KMS.InvalidStateException":    awswire.KindUnavailable,
	"KMS.NotFoundException":        awswire.KindUnavailable,
	"KMS.OptInRequired":            awswire.KindUnavailable,
}

// kindOf is what an SQS error code means for the route (KindOther when
// it says nothing about it).
func kindOf(code string) awswire.Kind {
	return awswire.KindOf(strings.TrimPrefix(code, "AWS.SimpleQueueService."), codeKinds)
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

// callError classifies the error of a whole call (SendMessageBatch or
// GetQueueUrl); sent says whether the request reached the transport.
func (p *Publisher) callError(ctx context.Context, what string, err error, sent bool) (awswire.Failure, error) {
	f := awswire.Fault{Sent: sent, SendFailed: errors.As(err, new(*smithyhttp.RequestSendError))}
	if ae := apiError(err); ae != nil {
		var re *awshttp.ResponseError
		f.Answered, f.Kind = true, kindOf(ae.ErrorCode())
		f.ServerFault = (errors.As(err, &re) && re.HTTPStatusCode() >= 500) || ae.ErrorFault() == smithy.FaultServer
	}
	return p.batch.CallError(ctx, what, err, f)
}

// apiError is the service's error answer in err, nil if none.
func apiError(err error) smithy.APIError {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}

// DefaultThrottleWait is how long the route is held after the service
// throttled a call; AWS answers give no wait of their own.
const DefaultThrottleWait = time.Second
